"""A headless Chromium driven through the DevTools protocol (websocket-client): it opens
a page, records every console error, uncaught exception, failed load and request that
leaves the page, runs JavaScript in it and takes screenshots."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Dict, List, Optional

import websocket


def chromium() -> Optional[str]:
    """The Chromium (or Chrome) on PATH, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    """One headless browser with one tab, 1280×800."""

    def __init__(self, executable: str) -> None:
        self.profile = tempfile.mkdtemp(prefix="threadx-chromium-")
        self.process = subprocess.Popen(
            [
                executable, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "--hide-scrollbars",
                "--remote-debugging-port=0", f"--user-data-dir={self.profile}", "--window-size=1280,800",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not port_file.exists() or not port_file.read_text().strip():
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.close()
                raise RuntimeError("Chromium did not start its DevTools endpoint")
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as answer:
            targets = json.load(answer)
        page = next(t for t in targets if t["type"] == "page")
        self.socket = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=60, suppress_origin=True)
        self.next_id = 0
        self.events: List[Dict[str, Any]] = []
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=1280, height=800, deviceScaleFactor=1, mobile=False)

    def call(self, method: str, **params: Any) -> Dict[str, Any]:
        self.next_id += 1
        mine = self.next_id
        self.socket.send(json.dumps({"id": mine, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == mine:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def open(self, path: Path) -> None:
        """Loads `path` and waits until its script says it drew everything."""
        self.events.clear()
        self.call("Page.navigate", url=path.resolve().as_uri())
        deadline = time.monotonic() + 60
        while self.evaluate("document.readyState === 'complete' && document.body && document.body.dataset.rendered === 'true'") is not True:
            if time.monotonic() > deadline:
                raise AssertionError(f"{path.name} did not finish drawing in 60 s; problems: {self.problems()}")
            time.sleep(0.1)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def problems(self) -> List[str]:
        """Console errors, exceptions, failed loads and requests beyond the page itself."""
        found = []
        for e in self.events:
            method, p = e["method"], e.get("params", {})
            if method == "Runtime.exceptionThrown":
                found.append(f"exception: {p['exceptionDetails'].get('exception', {}).get('description') or p['exceptionDetails'].get('text')}")
            elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                found.append(f"console.{p['type']}: {[a.get('value', a.get('description')) for a in p.get('args', [])]}")
            elif method == "Log.entryAdded" and p["entry"].get("level") == "error":
                found.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
            elif method == "Network.loadingFailed":
                found.append(f"failed load: {p.get('errorText')} ({p.get('requestId')})")
            elif method == "Network.requestWillBeSent":
                url = p["request"]["url"]
                if not url.startswith(("file://", "data:", "about:")):
                    found.append(f"request: {url}")
        return found

    def screenshot(self, path: Path, full_page: bool = False) -> None:
        params: Dict[str, Any] = {"format": "png"}
        if full_page:
            height = self.evaluate("Math.ceil(document.documentElement.scrollHeight)")
            params.update(captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": 1280, "height": height, "scale": 1})
        data = self.call("Page.captureScreenshot", **params)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))

    def screenshot_of(self, selector: str, path: Path) -> None:
        """A picture of the element `selector` alone (the first that matches)."""
        box = self.evaluate(
            f"(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
            " return [r.left + window.scrollX, r.top + window.scrollY, r.width, r.height]; })()"
        )
        x, y, width, height = box
        clip = {"x": x, "y": y, "width": width, "height": height, "scale": 1}
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True, clip=clip)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        sock = getattr(self, "socket", None)
        if sock is not None:
            sock.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.profile, ignore_errors=True)


def artifacts() -> Path:
    """Where screenshots go: $THREADX_ARTIFACTS, else the repository's artifacts/."""
    return Path(os.environ.get("THREADX_ARTIFACTS") or Path(__file__).resolve().parents[2] / "artifacts")
