//! The threaded engine of a pass: lanes (threads) per worker take chunks from the
//! scheduler, keep up to the worker's depth in flight, split chunks that run out of
//! memory, retire on failure, and hand outputs to the caller's thread, which delivers
//! them in chunk order.

use crate::error::{PoolError, WorkError};
use crate::schedule::{Scheduler, Slot, Take};
use crate::stats::{WorkerStats, stats_of};
use crate::worker::{Fault, Worker};
use crate::workload::{Chunk, InOrder, InWorker, Workload};
use rayon::prelude::*;
use std::collections::{BTreeMap, VecDeque};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError, mpsc};
use std::time::{Duration, Instant};

/// The caller's side: outputs waiting for their turn, and the callback that takes them.
pub(crate) struct Delivery<'a, O, E> {
    pub(crate) waiting: BTreeMap<Slot, O>,
    pub(crate) next: Slot,
    pub(crate) in_order: &'a mut InOrder<'a, O, E>,
}

/// What a pass left: the workers' tallies and the chunks no worker finished.
pub(crate) struct Pass {
    /// Per worker: what it did, and its raw tally (the ratios' refresh reads it).
    pub(crate) stats: Vec<WorkerStats>,
    pub(crate) tally: Vec<crate::schedule::Tally>,
    pub(crate) undone: Vec<Slot>,
}

/// What every lane of a pass shares.
struct Shared<'a, W: Workload, E> {
    workers: &'a [Worker],
    work: &'a W,
    chunks: &'a [Chunk],
    sched: Mutex<Scheduler>,
    wake: Condvar,
    stop: AtomicBool,
    /// Chunks taken per worker (for [`Fault::FailAt`]).
    taken: Vec<AtomicU64>,
    /// Lanes still running per worker: all but the last may leave when there is nothing to take.
    alive: Vec<AtomicUsize>,
    in_worker: &'a InWorker<'a, W::Output, E>,
}

/// What a lane sends the calling thread.
enum Message<O, E> {
    Done(Slot, O),
    Error(E),
}

/// One pass of `workers` over the chunks `sched` hands out: a thread per lane, outputs
/// delivered in chunk order on the calling thread; what no worker finished is left in
/// the pass's `undone`.
pub(crate) fn run_pass<W, E>(
    workers: &[Worker],
    sched: Scheduler,
    work: &W,
    chunks: &[Chunk],
    in_worker: &InWorker<'_, W::Output, E>,
    delivery: &mut Delivery<'_, W::Output, E>,
) -> Result<Pass, E>
where
    W: Workload,
    E: From<PoolError> + Send,
{
    let shared = Shared {
        workers,
        work,
        chunks,
        sched: Mutex::new(sched),
        wake: Condvar::new(),
        stop: AtomicBool::new(false),
        taken: workers.iter().map(|_| AtomicU64::new(0)).collect(),
        alive: workers.iter().map(|w| AtomicUsize::new(w.lanes)).collect(),
        in_worker,
    };
    let kernels = || -> Vec<Option<f64>> {
        workers.iter().map(|w| w.device.gpu().and_then(|ctx| ctx.kernel_seconds())).collect()
    };
    let kernels_before = kernels();
    let started = Instant::now();
    let (tx, rx) = mpsc::channel::<Message<W::Output, E>>();
    let mut failure = None;
    std::thread::scope(|scope| {
        // Every lane is a thread of its own that mostly waits; the CPU's work inside it
        // runs on the worker's rayon pool (`Worker::install`).
        for (w, worker) in workers.iter().enumerate() {
            for lane in 0..worker.lanes {
                let (shared, tx) = (&shared, tx.clone());
                scope.spawn(move || guarded(shared, w, lane, &tx));
            }
        }
        drop(tx);
        for message in rx {
            let result = match message {
                Message::Done(slot, output) => {
                    delivery.waiting.insert(slot, output);
                    let mut result = Ok(());
                    while let Some(output) = delivery.waiting.remove(&delivery.next) {
                        let chunk = &chunks[delivery.next];
                        delivery.next += 1;
                        result = (delivery.in_order)(chunk, output);
                        if result.is_err() {
                            break;
                        }
                    }
                    result
                }
                Message::Error(e) => Err(e),
            };
            if let Err(e) = result {
                shared.stop.store(true, Ordering::SeqCst);
                shared.wake.notify_all();
                failure = Some(e);
                break;
            }
        }
    });
    if let Some(e) = failure {
        return Err(e);
    }
    let pass_s = started.elapsed().as_secs_f64();
    let sched = shared.sched.into_inner().unwrap_or_else(PoisonError::into_inner);
    let stats = workers
        .iter()
        .zip(&sched.tally)
        .zip(kernels_before.into_iter().zip(kernels()))
        .map(|((w, t), (before, after))| stats_of(work, w, t, pass_s, before.zip(after).map(|(b, a)| a - b)))
        .collect();
    Ok(Pass { stats, undone: sched.undone(), tally: sched.tally })
}

/// Runs a lane; a panic stops the whole pass (so no lane waits for a chunk that will never
/// finish) and is then re-raised.
fn guarded<W: Workload, E: Send>(
    shared: &Shared<'_, W, E>,
    w: usize,
    lane: usize,
    tx: &mpsc::Sender<Message<W::Output, E>>,
) {
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_lane(shared, w, lane, tx)));
    if let Err(panic) = result {
        shared.stop.store(true, Ordering::SeqCst);
        shared.wake.notify_all();
        std::panic::resume_unwind(panic);
    }
}

impl<W: Workload, E: Send> Shared<'_, W, E> {
    fn lock(&self) -> MutexGuard<'_, Scheduler> {
        self.sched.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next chunk for this lane; with `block`, waits while other workers may still
    /// fail (requeuing chunks) or a backup may become worth running. A lane that is not
    /// its worker's last leaves instead of waiting: one poller per worker is enough.
    fn take(&self, w: usize, lane: usize, block: bool) -> Take {
        let mut sched = self.lock();
        loop {
            if self.stop.load(Ordering::SeqCst) {
                return Take::Exit;
            }
            match sched.take(w, lane, Instant::now()) {
                Take::Wait if block => {
                    // Under the scheduler's lock: lanes leave one at a time.
                    if self.alive[w].load(Ordering::SeqCst) > 1 {
                        self.alive[w].fetch_sub(1, Ordering::SeqCst);
                        return Take::Exit;
                    }
                    sched = self.wake.wait_timeout(sched, Scheduler::POLL).unwrap_or_else(PoisonError::into_inner).0;
                }
                other => return other,
            }
        }
    }

    /// Runs `items` of chunk `slot` on `lane` to the end, splitting it in halves while it
    /// runs out of memory; the learned largest piece (`fits`) cuts later chunks up front.
    /// `None` when another copy of the chunk was delivered first.
    fn run_split(
        &self,
        w: usize,
        state: &mut W::Lane,
        slot: Slot,
        items: Range<u64>,
        fits: &mut u64,
    ) -> Result<Option<W::Output>, WorkError> {
        let index = self.chunks[slot].index;
        let len = items.end - items.start;
        if len <= *fits || len == 1 {
            let single = std::slice::from_ref(&items);
            let output = self.submit(w, state, single).and_then(|p| self.finish(w, state, &[slot], p));
            match output {
                Ok(Some(parts)) if parts.len() != 1 => {
                    return Err(WorkError::Failed(format!("the device gave {} outputs for one piece", parts.len())));
                }
                Ok(parts) => return Ok(parts.and_then(|mut p| p.pop())),
                Err(WorkError::OutOfMemory(e)) if len > 1 => {
                    let first = {
                        let mut sched = self.lock();
                        sched.tally[w].splits += 1;
                        sched.tally[w].splits == 1
                    };
                    if first {
                        tracing::warn!(
                            "{}: out of memory on chunk {index} ({len} {}): {e}; splitting it and retrying on the same device",
                            self.workers[w].name,
                            self.work.unit()
                        );
                    }
                    *fits = (*fits).min(len / 2);
                }
                Err(e) => return Err(e),
            }
        }
        let mid = items.start + len / 2;
        let Some(first) = self.run_split(w, state, slot, items.start..mid, fits)? else { return Ok(None) };
        let Some(second) = self.run_split(w, state, slot, mid..items.end, fits)? else { return Ok(None) };
        Ok(Some(self.work.join(vec![first, second])))
    }

    /// Starts `pieces` as one dispatch on worker `w`.
    fn submit(&self, w: usize, state: &mut W::Lane, pieces: &[Range<u64>]) -> Result<W::Pending, WorkError> {
        let worker = &self.workers[w];
        let items: u64 = pieces.iter().map(|p| p.end - p.start).sum();
        worker.injected_out_of_memory(&(0..items))?;
        let pending = self.timed(w, 0, || worker.install(|| self.work.submit(state, pieces)))?;
        self.lock().tally[w].dispatches += 1;
        Ok(pending)
    }

    /// Runs `f`, adding its time to phase `phase` of worker `w`.
    fn timed<R>(&self, w: usize, phase: usize, f: impl FnOnce() -> R) -> R {
        let started = Instant::now();
        let r = f();
        self.lock().tally[w].phases[phase] += started.elapsed().as_secs_f64();
        r
    }

    /// Waits for the outputs of `slots` (one dispatch) on worker `w`, or gives up once
    /// another copy of each was delivered or the run stopped: a lagging device does not
    /// hold the run's end.
    fn finish(
        &self,
        w: usize,
        state: &mut W::Lane,
        slots: &[Slot],
        pending: W::Pending,
    ) -> Result<Option<Vec<W::Output>>, WorkError> {
        let wanted = || {
            !self.stop.load(Ordering::SeqCst) && {
                let sched = self.lock();
                slots.iter().any(|&slot| !sched.is_done(slot))
            }
        };
        self.timed(w, 1, || self.workers[w].install(|| self.work.finish(state, pending, &wanted)))
    }

    /// Books a copy of `slot` that worker `w` leaves unread (another copy came first).
    fn drop_unread(&self, w: usize, lane: usize, slot: Slot) {
        self.lock().complete(slot, w, lane, Instant::now());
        self.wake.notify_all();
    }

    /// Whether the `FailAt` fault of worker `w` strikes on the chunk it takes now.
    fn injected_failure(&self, w: usize) -> bool {
        let n = self.taken[w].fetch_add(1, Ordering::SeqCst);
        matches!(self.workers[w].fault, Some(Fault::FailAt { chunk }) if chunk == n)
    }

    /// Sleeps a throttled worker's extra time, waking early when the run stops or the
    /// chunk was finished elsewhere.
    fn throttle(&self, w: usize, slot: Slot, worked: Duration) {
        let deadline = Instant::now() + worked.mul_f64(self.workers[w].slowdown);
        // Plain sleeps in short slices: as precise as the device they stand in for.
        while !self.stop.load(Ordering::SeqCst) && !self.lock().is_done(slot) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(Duration::from_millis(25)));
        }
    }

    /// Hands over the output of `slot`, taken at `started`: see [`Self::deliver_all`].
    fn deliver(
        &self,
        w: usize,
        lane: usize,
        slot: Slot,
        output: W::Output,
        started: Instant,
        tx: &mpsc::Sender<Message<W::Output, E>>,
    ) {
        self.deliver_all(w, lane, vec![(slot, output)], started, tx);
    }

    /// Hands over the outputs of one dispatch, taken at `started` (after a throttled
    /// worker's extra time): each chunk finished here first goes to `in_worker` (the
    /// chunks of a wide dispatch side by side on the worker's pool) and then to the
    /// caller, in order.
    fn deliver_all(
        &self,
        w: usize,
        lane: usize,
        outputs: Vec<(Slot, W::Output)>,
        started: Instant,
        tx: &mpsc::Sender<Message<W::Output, E>>,
    ) {
        let firsts: Vec<(Slot, W::Output)> = outputs
            .into_iter()
            .filter(|&(slot, _)| {
                self.throttle(w, slot, started.elapsed());
                let first = self.lock().complete(slot, w, lane, Instant::now());
                self.wake.notify_all();
                first
            })
            .collect();
        if firsts.is_empty() || self.stop.load(Ordering::SeqCst) {
            return;
        }
        let handed: Vec<(Slot, Result<(), E>, W::Output)> = self.timed(w, 2, || {
            self.workers[w].install(|| {
                firsts
                    .into_par_iter()
                    .map(|(slot, output)| (slot, (self.in_worker)(&self.chunks[slot], &output), output))
                    .collect()
            })
        });
        for (slot, handed, output) in handed {
            let message = match handed {
                Ok(()) => Message::Done(slot, output),
                Err(e) => Message::Error(e),
            };
            // The receiver leaves only after an error; nothing is left to report then.
            let _ = tx.send(message);
        }
    }

    fn fail(&self, w: usize, lane: usize, slots: &[Slot], reason: &str) {
        let name = &self.workers[w].name;
        let mut sched = self.lock();
        if sched.tally[w].failed.is_none() {
            tracing::warn!(
                "{name} failed ({reason}); its chunks go to the other workers and it is retired for this run"
            );
        }
        sched.fail(w, lane, slots, reason, Instant::now());
        drop(sched);
        self.wake.notify_all();
    }
}

/// A dispatch in flight on a lane: its chunks, what the device will hand back, and when
/// it was taken.
struct Flight<P> {
    slots: Vec<Slot>,
    pending: P,
    started: Instant,
}

impl<W: Workload, E: Send> Shared<'_, W, E> {
    /// The chunks of the lane's next dispatch: the first (waiting for one when `block`),
    /// then more while they hold fewer than `width` items and another of that size still
    /// `fits` the memory. Empty when the lane should stop.
    fn take_dispatch(&self, w: usize, lane: usize, block: bool, width: u64, fits: u64) -> Vec<Slot> {
        let Take::Chunk(first) = self.take(w, lane, block) else { return Vec::new() };
        let one = self.items(&[first]);
        let mut slots = vec![first];
        let mut items = one;
        while items < width && items.saturating_add(one) <= fits {
            let Some(slot) = self.lock().take_more(w, lane, items, Instant::now()) else { break };
            items += self.items(&[slot]);
            slots.push(slot);
        }
        slots
    }

    fn pieces(&self, slots: &[Slot]) -> Vec<Range<u64>> {
        slots.iter().map(|&s| self.chunks[s].items.clone()).collect()
    }

    /// The items of `slots`' chunks together.
    fn items(&self, slots: &[Slot]) -> u64 {
        slots.iter().map(|&s| self.chunks[s].items.end - self.chunks[s].items.start).sum()
    }
}

/// One lane: take chunks (several a dispatch where the device is wide), keep up to the
/// worker's depth of dispatches in flight, deliver in the order taken, split what runs
/// out of memory, retire the worker on failure.
fn run_lane<W: Workload, E: Send>(
    shared: &Shared<'_, W, E>,
    w: usize,
    lane: usize,
    tx: &mpsc::Sender<Message<W::Output, E>>,
) {
    let worker = &shared.workers[w];
    let mut state = match worker.install(|| shared.work.open(&worker.device)) {
        Ok(state) => state,
        Err(e) => return shared.fail(w, lane, &[], &e.to_string()),
    };
    let width = shared.work.dispatch_items(&state);
    let mut fits = u64::MAX;
    let mut flight: VecDeque<Flight<W::Pending>> = VecDeque::new();
    // Every chunk this lane holds goes back to the others when it fails.
    let held = |flight: &VecDeque<Flight<W::Pending>>, more: &[Slot]| -> Vec<Slot> {
        flight.iter().flat_map(|f| f.slots.iter().copied()).chain(more.iter().copied()).collect()
    };
    loop {
        while flight.len() < worker.depth {
            // With nothing in flight this waits; nothing taken means the lane should stop.
            let slots = shared.take_dispatch(w, lane, flight.is_empty(), width, fits);
            if slots.is_empty() {
                break;
            }
            let started = Instant::now();
            // Every chunk taken counts towards a `FailAt` fault.
            if slots.iter().map(|_| shared.injected_failure(w)).fold(false, |a, b| a | b) {
                return shared.fail(w, lane, &held(&flight, &slots), "injected failure (device lost)");
            }
            let submitted = if shared.items(&slots) > fits {
                Err(WorkError::OutOfMemory("larger than the largest piece that fit".into()))
            } else {
                shared.submit(w, &mut state, &shared.pieces(&slots))
            };
            match submitted {
                Ok(pending) => flight.push_back(Flight { slots, pending, started }),
                Err(WorkError::OutOfMemory(_)) => {
                    // Finish what is in flight first (it may be what holds the memory).
                    while let Some(f) = flight.pop_front() {
                        let slots_held = f.slots.clone();
                        if let Err(e) = finish_one(shared, w, lane, &mut state, f, &mut fits, tx) {
                            return shared.fail(w, lane, &held(&flight, &[&slots_held[..], &slots].concat()), &e);
                        }
                    }
                    if let Err(e) = split_each(shared, w, lane, &mut state, &slots, started, &mut fits, tx) {
                        return shared.fail(w, lane, &slots, &e);
                    }
                }
                Err(WorkError::Failed(e)) => return shared.fail(w, lane, &held(&flight, &slots), &e),
            }
        }
        let Some(f) = flight.pop_front() else { return };
        let slots_held = f.slots.clone();
        if let Err(e) = finish_one(shared, w, lane, &mut state, f, &mut fits, tx) {
            return shared.fail(w, lane, &held(&flight, &slots_held), &e);
        }
    }
}

/// Runs each of `slots` (a dispatch that ran out of memory) on its own, halving it while it
/// runs out of memory, and delivers it. Later dispatches take at most half of this one.
#[allow(clippy::too_many_arguments)]
fn split_each<W: Workload, E: Send>(
    shared: &Shared<'_, W, E>,
    w: usize,
    lane: usize,
    state: &mut W::Lane,
    slots: &[Slot],
    started: Instant,
    fits: &mut u64,
    tx: &mpsc::Sender<Message<W::Output, E>>,
) -> Result<(), String> {
    if slots.len() > 1 {
        *fits = (*fits).min(shared.items(slots) / 2);
    }
    for &slot in slots {
        match shared.run_split(w, state, slot, shared.chunks[slot].items.clone(), fits) {
            Ok(Some(output)) => shared.deliver(w, lane, slot, output, started, tx),
            Ok(None) => shared.drop_unread(w, lane, slot),
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(())
}

/// Finishes one dispatch in flight and delivers its chunks (each split on its own if the
/// dispatch ran out of memory); the error is why the worker must be retired.
fn finish_one<W: Workload, E: Send>(
    shared: &Shared<'_, W, E>,
    w: usize,
    lane: usize,
    state: &mut W::Lane,
    flight: Flight<W::Pending>,
    fits: &mut u64,
    tx: &mpsc::Sender<Message<W::Output, E>>,
) -> Result<(), String> {
    let Flight { slots, pending, started } = flight;
    match shared.finish(w, state, &slots, pending) {
        Err(WorkError::OutOfMemory(_)) => split_each(shared, w, lane, state, &slots, started, fits, tx),
        Err(e) => Err(e.to_string()),
        Ok(None) => {
            for &slot in &slots {
                shared.drop_unread(w, lane, slot);
            }
            Ok(())
        }
        Ok(Some(outputs)) if outputs.len() != slots.len() => {
            Err(format!("the device gave {} outputs for a dispatch of {} chunks", outputs.len(), slots.len()))
        }
        Ok(Some(outputs)) => {
            shared.deliver_all(w, lane, slots.into_iter().zip(outputs).collect(), started, tx);
            Ok(())
        }
    }
}
