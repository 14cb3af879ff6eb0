//! The Session: a batch of combos gives exactly the full sweep's rows for them (and their
//! blocks, for the overfitting statistics), on the CPU and on every adapter, whatever the
//! batch's order, size or repeats; bad batches are refused with the reason.

use std::sync::Arc;
use threadx_dispatch::DeviceMode;
use threadx_dispatch::testing::{adapters, dispatcher_in};
use threadx_indicators::Ohlcv;
use threadx_stats::SeededRng;
use threadx_sweep::{ChunkResult, OverfittingRequest, Sample, Session, SweepRequest, SweepSpec};

fn request(mode: DeviceMode) -> SweepRequest {
    SweepRequest {
        device: Some(mode),
        chunk_size: Some(7),
        ..SweepRequest::new(
            "bb_atr",
            &[("bb_period", "10:40:10"), ("bb_std", "1.5,2,2.5"), ("atr_period", "7,14"), ("atr_mult", "1:3:0.5")],
        )
    }
}

fn session(spec: &SweepSpec, data: &Arc<Ohlcv>, dir: &tempfile::TempDir) -> Session {
    let dispatcher = Arc::new(dispatcher_in(dir.path(), spec.device()));
    Session::new(spec, data.clone(), dispatcher, &mut |_| {}).unwrap()
}

/// Each row as `combo: metrics JSON`, the bytes a row is written from.
fn rows(result: &ChunkResult) -> Vec<String> {
    result.combos.iter().zip(&result.metrics).map(|(c, m)| format!("{c}: {:?}", m.values().map(f64::to_bits))).collect()
}

#[test]
fn a_batch_gives_the_full_sweeps_rows_on_every_device() {
    let data = Arc::new(Ohlcv::load("synthetic:bars=3000,seed=5").unwrap());
    let dir = tempfile::tempdir().unwrap();
    let cpu = session(&request(DeviceMode::Cpu).check().unwrap(), &data, &dir);
    let full = rows(&cpu.run_in_memory(&mut |_, _| Ok(())).unwrap());
    assert_eq!(full.len() as u64, cpu.spec().grid_len());
    let mut rng = SeededRng::new(11);
    // Random combos, unsorted and with repeats, in batches of several sizes.
    let batch: Vec<u64> = (0..300).map(|_| rng.next_u64() % full.len() as u64).collect();
    let expected: Vec<String> = batch.iter().map(|&c| full[c as usize].clone()).collect();
    let mut sessions = vec![cpu];
    if !adapters().is_empty() {
        sessions.push(session(&request(DeviceMode::Gpu).check().unwrap(), &data, &dir));
    }
    for s in &sessions {
        assert_eq!(rows(&s.evaluate(&batch).unwrap()), expected, "{:?}", s.workers());
        for size in [1, 5, 64] {
            let part = &batch[..size];
            assert_eq!(rows(&s.evaluate(part).unwrap()), expected[..size], "{size} combos on {:?}", s.workers());
        }
        // Parameter sets give their combos' rows.
        let params: Vec<Vec<f64>> = batch[..20].iter().map(|&c| s.sweep().book().combo_values(c).to_vec()).collect();
        assert_eq!(rows(&s.evaluate_params(&params).unwrap()), expected[..20]);
        assert!(s.evaluate(&[]).unwrap().combos.is_empty());
    }
}

#[test]
fn a_batch_gives_the_full_sweeps_blocks_on_every_device() {
    let data = Arc::new(Ohlcv::load("synthetic:bars=3000,seed=5").unwrap());
    let dir = tempfile::tempdir().unwrap();
    let with_blocks = |mode| SweepRequest { overfitting: Some(OverfittingRequest::default()), ..request(mode) };
    let cpu = session(&with_blocks(DeviceMode::Cpu).check().unwrap(), &data, &dir);
    let full = cpu.run_in_memory(&mut |_, _| Ok(())).unwrap();
    let per = full.blocks.len() / full.combos.len();
    assert_eq!(per, 32, "16 blocks of Σr and Σr²");
    let mut rng = SeededRng::new(12);
    let batch: Vec<u64> = (0..100).map(|_| rng.next_u64() % full.combos.len() as u64).collect();
    let expected: Vec<u64> = batch
        .iter()
        .flat_map(|&c| full.blocks[c as usize * per..(c as usize + 1) * per].iter().map(|v| v.to_bits()))
        .collect();
    let mut sessions = vec![cpu];
    if !adapters().is_empty() {
        sessions.push(session(&with_blocks(DeviceMode::Gpu).check().unwrap(), &data, &dir));
    }
    for s in &sessions {
        let got = s.evaluate(&batch).unwrap();
        assert_eq!(got.blocks.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), expected, "{:?}", s.workers());
    }
}

/// The overfitting object without its timing.
fn statistics(s: &Session, rows: &ChunkResult) -> String {
    let mut summary = s.overfitting(rows, "sharpe", false, &[]).unwrap().unwrap().summary();
    summary.seconds = 0.0;
    serde_json::to_string(&summary).unwrap()
}

#[test]
fn the_overfitting_statistics_are_the_same_with_cscv_on_every_device() {
    let data = Arc::new(Ohlcv::load("synthetic:bars=3000,seed=6").unwrap());
    let dir = tempfile::tempdir().unwrap();
    let with_blocks = |mode| SweepRequest { overfitting: Some(OverfittingRequest::default()), ..request(mode) };
    let cpu = session(&with_blocks(DeviceMode::Cpu).check().unwrap(), &data, &dir);
    let rows = cpu.run_in_memory(&mut |_, _| Ok(())).unwrap();
    let expected = statistics(&cpu, &rows);
    assert!(expected.contains("\"exhaustive\":true"), "{expected}");
    if adapters().is_empty() {
        return;
    }
    let gpu = session(&with_blocks(DeviceMode::Gpu).check().unwrap(), &data, &dir);
    assert_eq!(statistics(&gpu, &gpu.run_in_memory(&mut |_, _| Ok(())).unwrap()), expected);
    // CSCV ran on the GPU (a GPU error would have fallen back to the CPU).
    let cscv: Vec<_> =
        gpu.dispatcher().profile_decisions().into_iter().filter(|(k, ..)| k.starts_with("cscv")).collect();
    assert!(matches!(&cscv[..], [(_, view, _)] if view.gpu.n == 1 && view.cpu.n == 0), "{cscv:?}");
}

#[test]
fn combos_off_the_grid_or_the_sample_are_refused() {
    let data = Arc::new(Ohlcv::load("synthetic:bars=1000,seed=5").unwrap());
    let dir = tempfile::tempdir().unwrap();
    let s = session(&request(DeviceMode::Cpu).check().unwrap(), &data, &dir);
    assert_eq!(
        s.evaluate(&[120]).unwrap_err().to_string(),
        "combo 120 is not in the grid, which has 120 combos (0 to 119)"
    );
    assert_eq!(
        s.evaluate_params(&[vec![15.0, 2.0, 7.0, 1.0]]).unwrap_err().to_string(),
        "bb_period=15: not on the session's grid (its values: 10, 20, 30, 40)"
    );
    assert_eq!(
        s.evaluate_params(&[vec![10.0, 2.0]]).unwrap_err().to_string(),
        "2 values given for the 4 parameters of bb_atr"
    );
    let sampled = SweepRequest { random: Some(Sample { n: 10, seed: 3 }), ..request(DeviceMode::Cpu) };
    let s = session(&sampled.check().unwrap(), &data, &dir);
    let drawn = s.sweep().combos().sample().unwrap().to_vec();
    assert_eq!(s.evaluate(&drawn).unwrap().combos, drawn);
    let outside = (0..120).find(|c| !drawn.contains(c)).unwrap();
    assert!(s.evaluate(&[outside]).unwrap_err().to_string().contains("is not among the combos this session drew"));
}
