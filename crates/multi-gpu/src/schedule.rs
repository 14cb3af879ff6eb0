//! Which worker runs which chunk next: the proportional first assignment, stealing,
//! backups of slow chunks at the tail, and requeuing after failures. Pure bookkeeping
//! (no threads, no devices), so its rules are tested directly.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Slot `s` is the s-th chunk of the run, in chunk order.
pub(crate) type Slot = usize;

#[derive(Debug, Clone, Copy)]
struct Run {
    worker: usize,
    lane: usize,
    started: Instant,
}

/// What a worker learned and did so far.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tally {
    /// Chunks whose output was taken from this worker.
    pub chunks: u64,
    /// Dispatches submitted (several chunks each on a wide device).
    pub dispatches: u64,
    pub items: u64,
    /// Seconds with at least one chunk in flight.
    pub busy: f64,
    /// Chunks it finished after another worker had (backups that lost).
    pub duplicates: u64,
    /// Items it finished, taken or not (what its throughput is measured on).
    pub finished_items: u64,
    /// Times a piece ran out of memory on it and was split in two.
    pub splits: u64,
    pub failed: Option<String>,
    /// Seconds its lanes spent in `submit`, in `finish` and handing outputs over.
    pub phases: [f64; 3],
    in_flight: usize,
    busy_since: Option<Instant>,
}

impl Tally {
    /// Items per second over the busy time; None before anything finished.
    pub fn rate(&self, now: Instant) -> Option<f64> {
        let busy = self.busy + self.busy_since.map_or(0.0, |s| now.duration_since(s).as_secs_f64());
        (self.finished_items > 0 && busy > 0.0).then(|| self.finished_items as f64 / busy)
    }
}

#[derive(Debug)]
pub(crate) struct Scheduler {
    items: Vec<u64>,
    queues: Vec<VecDeque<Slot>>,
    /// Chunks no worker holds: requeued after a failure.
    shared: VecDeque<Slot>,
    running: Vec<Vec<Run>>,
    done: Vec<bool>,
    remaining: usize,
    pub retired: Vec<bool>,
    pub tally: Vec<Tally>,
    /// Items per second from the profile, used until a worker has measured itself.
    prior: Vec<Option<f64>>,
}

/// What a free lane should do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Take {
    Chunk(Slot),
    /// Nothing for this worker now; chunks are still in flight elsewhere.
    Wait,
    /// Every chunk is done, or this worker is retired.
    Exit,
}

impl Scheduler {
    /// The chunks of `order` (indices into `items`, their sizes in chunk order; in the
    /// order they are handed out) assigned in proportion to `ratios` (one per worker; zero: none up front) by stride
    /// scheduling, so each worker's queue is spread over the whole run and outputs arrive
    /// nearly in chunk order. `prior` holds each worker's expected items per second.
    pub fn new(items: Vec<u64>, order: &[Slot], ratios: &[f64], prior: Vec<Option<f64>>) -> Self {
        let workers = ratios.len();
        let mut queues = vec![VecDeque::new(); workers];
        let mut shared = VecDeque::new();
        let mut assigned = vec![0.0f64; workers];
        for &slot in order {
            // The next chunk goes to the worker furthest behind its share.
            let best = (0..workers)
                .filter(|&w| ratios[w] > 0.0)
                .min_by(|&a, &b| ((assigned[a] + 1.0) / ratios[a]).total_cmp(&((assigned[b] + 1.0) / ratios[b])));
            match best {
                Some(w) => {
                    assigned[w] += 1.0;
                    queues[w].push_back(slot);
                }
                None => shared.push_back(slot),
            }
        }
        let n = items.len();
        let mut done = vec![true; n];
        for &slot in order {
            done[slot] = false;
        }
        Self {
            items,
            queues,
            shared,
            running: vec![Vec::new(); n],
            done,
            remaining: order.len(),
            retired: vec![false; workers],
            tally: vec![Tally::default(); workers],
            prior,
        }
    }

    pub fn is_done(&self, slot: Slot) -> bool {
        self.done[slot]
    }

    fn rate(&self, w: usize, now: Instant) -> Option<f64> {
        self.tally[w].rate(now).or(self.prior[w])
    }

    /// Expected seconds for `w` to run `items`.
    fn time(&self, w: usize, items: u64, now: Instant) -> Option<f64> {
        self.rate(w, now).map(|r| items as f64 / r)
    }

    /// The next chunk for a free lane of worker `w`: its own queue, then the shared one,
    /// then a steal from the worker with the most queued time (when this one would finish
    /// the chunk sooner than that worker gets to the end of its queue), then a backup of a
    /// chunk in flight that this worker would finish before its runner is expected to.
    pub fn take(&mut self, w: usize, lane: usize, now: Instant) -> Take {
        if self.retired[w] || self.remaining == 0 {
            return Take::Exit;
        }
        let slot = self.queues[w].pop_front().or_else(|| self.shared.pop_front()).or_else(|| self.steal(w, 0, now));
        if let Some(slot) = slot {
            self.start(slot, w, lane, now);
            return Take::Chunk(slot);
        }
        match self.backup(w, now) {
            Some(slot) => {
                self.start(slot, w, lane, now);
                Take::Chunk(slot)
            }
            None => Take::Wait,
        }
    }

    /// One more chunk for a lane of `w` that is filling a wide dispatch of `group` items so
    /// far: from its own queue, the shared one, or a steal worth it with the group counted;
    /// never a backup (that is for a lane with nothing else to do), and never a wait.
    pub fn take_more(&mut self, w: usize, lane: usize, group: u64, now: Instant) -> Option<Slot> {
        if self.retired[w] {
            return None;
        }
        let slot =
            self.queues[w].pop_front().or_else(|| self.shared.pop_front()).or_else(|| self.steal(w, group, now))?;
        self.start(slot, w, lane, now);
        Some(slot)
    }

    /// The front chunk of the worker with the most queued time, when `thief` would finish
    /// it (after `already` items it holds for the same dispatch) before that worker gets to
    /// the end of its queue.
    fn steal(&mut self, thief: usize, already: u64, now: Instant) -> Option<Slot> {
        let queued_time = |s: &Self, v: usize| {
            let items: u64 = s.queues[v].iter().map(|&c| s.items[c]).sum();
            s.time(v, items, now).unwrap_or(f64::INFINITY)
        };
        let victim = (0..self.queues.len())
            .filter(|&v| v != thief && !self.queues[v].is_empty())
            .max_by(|&a, &b| queued_time(self, a).total_cmp(&queued_time(self, b)))?;
        let slot = *self.queues[victim].front()?;
        // A thief not yet measured steals a lone chunk (its lane is idle), never more of
        // them into a dispatch it is filling.
        let worth = match self.time(thief, already + self.items[slot], now) {
            Some(t) => t < queued_time(self, victim),
            None => already == 0,
        };
        worth.then(|| self.queues[victim].pop_front()).flatten()
    }

    fn backup(&self, thief: usize, now: Instant) -> Option<Slot> {
        let mine = self.rate(thief, now)?;
        (0..self.running.len())
            .filter(|&s| !self.done[s] && self.running[s].len() == 1 && self.running[s][0].worker != thief)
            .filter_map(|s| {
                let run = self.running[s][0];
                let elapsed = now.duration_since(run.started).as_secs_f64();
                // A runner past its expected time (or with none) is assumed to need as long again.
                let left = match self.time(run.worker, self.items[s], now) {
                    Some(expected) if expected > elapsed => expected - elapsed,
                    _ => elapsed,
                };
                (self.items[s] as f64 / mine < left).then_some((s, left))
            })
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(s, _)| s)
    }

    fn start(&mut self, slot: Slot, w: usize, lane: usize, now: Instant) {
        self.running[slot].push(Run { worker: w, lane, started: now });
        let t = &mut self.tally[w];
        if t.in_flight == 0 {
            t.busy_since = Some(now);
        }
        t.in_flight += 1;
    }

    fn stop(&mut self, slot: Slot, w: usize, lane: usize, now: Instant) {
        self.running[slot].retain(|r| !(r.worker == w && r.lane == lane));
        let t = &mut self.tally[w];
        t.in_flight = t.in_flight.saturating_sub(1);
        if t.in_flight == 0
            && let Some(since) = t.busy_since.take()
        {
            t.busy += now.duration_since(since).as_secs_f64();
        }
    }

    /// Worker `w` finished `slot`; true when its output is the one to keep (the first).
    pub fn complete(&mut self, slot: Slot, w: usize, lane: usize, now: Instant) -> bool {
        self.stop(slot, w, lane, now);
        let items = self.items[slot];
        let t = &mut self.tally[w];
        t.finished_items += items;
        if self.done[slot] {
            t.duplicates += 1;
            return false;
        }
        t.chunks += 1;
        t.items += items;
        self.done[slot] = true;
        self.remaining -= 1;
        true
    }

    /// A lane of `w` failed with `slots` in flight: `w` is retired, and those chunks and
    /// its queue go to the shared queue (in chunk order) unless another worker runs them.
    pub fn fail(&mut self, w: usize, lane: usize, slots: &[Slot], reason: &str, now: Instant) {
        for &slot in slots {
            self.stop(slot, w, lane, now);
        }
        self.retired[w] = true;
        self.tally[w].failed.get_or_insert_with(|| reason.to_owned());
        let mut back: Vec<Slot> = self.queues[w].drain(..).collect();
        back.extend(slots.iter().copied().filter(|&s| !self.done[s] && self.running[s].is_empty()));
        back.extend(self.shared.drain(..));
        back.sort_unstable();
        back.dedup();
        self.shared = back.into();
    }

    /// The chunks not done, in chunk order.
    pub fn undone(&self) -> Vec<Slot> {
        (0..self.done.len()).filter(|&s| !self.done[s]).collect()
    }

    /// How long a waiting lane sleeps before it looks again (a backup may become worth it).
    pub const POLL: Duration = Duration::from_millis(5);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_assignment_follows_the_ratios_interleaved() {
        let order: Vec<Slot> = (0..12).collect();
        let s = Scheduler::new(vec![10; 12], &order, &[0.75, 0.25], vec![None, None]);
        assert_eq!(s.queues[0], [0, 1, 2, 4, 5, 6, 8, 9, 10]);
        assert_eq!(s.queues[1], [3, 7, 11]);
        // A worker with no share gets nothing up front.
        let s = Scheduler::new(vec![10; 4], &order[..4], &[1.0, 0.0], vec![None, None]);
        assert_eq!((s.queues[0].len(), s.queues[1].len()), (4, 0));
    }

    #[test]
    fn an_idle_worker_steals_then_backs_up_a_slow_chunk_and_the_first_result_wins() {
        let t0 = Instant::now();
        let order: Vec<Slot> = (0..3).collect();
        // Worker 1 is profiled at 1,000 items/s, worker 0 at 10: 0 takes chunk 0 as assigned.
        let mut s = Scheduler::new(vec![100; 3], &order, &[0.5, 0.5], vec![Some(10.0), Some(1000.0)]);
        assert_eq!(s.take(0, 0, t0), Take::Chunk(0));
        assert_eq!(s.take(1, 0, t0), Take::Chunk(1));
        assert!(s.complete(1, 1, 0, t0 + Duration::from_millis(100)));
        // Chunk 2 was assigned to worker 0, which is busy for 10 s: worker 1 steals it.
        assert_eq!(s.take(1, 0, t0 + Duration::from_millis(100)), Take::Chunk(2));
        assert!(s.complete(2, 1, 0, t0 + Duration::from_millis(200)));
        // Nothing queued: worker 1 (100 items in 0.1 s) backs up worker 0's chunk 0 (10 s).
        let later = t0 + Duration::from_millis(300);
        assert_eq!(s.take(1, 0, later), Take::Chunk(0));
        assert!(s.complete(0, 1, 0, later + Duration::from_millis(100)));
        assert_eq!(s.remaining, 0);
        assert!(!s.complete(0, 0, 0, later + Duration::from_secs(9)), "the slow copy is dropped");
        assert_eq!(s.tally[0].duplicates, 1);
        assert_eq!((s.tally[1].chunks, s.tally[1].items), (3, 300));
        assert_eq!(s.take(0, 0, later), Take::Exit);
    }

    #[test]
    fn a_wide_dispatch_fills_from_its_own_queue_then_the_shared_one_and_never_backs_up() {
        let t0 = Instant::now();
        let order: Vec<Slot> = (0..6).collect();
        let mut s = Scheduler::new(vec![10; 6], &order, &[0.5, 0.5], vec![Some(10.0), Some(10.0)]);
        assert_eq!(s.take(0, 0, t0), Take::Chunk(0));
        assert_eq!((s.take_more(0, 0, 10, t0), s.take_more(0, 0, 20, t0)), (Some(2), Some(4)));
        // Worker 1's queue (1, 3, 5: 3 s) ends before worker 0 would end 40 items (4 s): no steal.
        assert_eq!(s.take_more(0, 0, 30, t0), None);
        // With less of its own in the dispatch, stealing the front of that queue pays.
        assert_eq!(s.take_more(0, 0, 10, t0), Some(1));
        assert_eq!(s.take(1, 0, t0), Take::Chunk(3));
        s.fail(1, 0, &[3], "device lost", t0);
        assert_eq!(s.take_more(1, 0, 0, t0), None, "a retired worker takes nothing");
        // The failed worker's chunks are shared: a wide dispatch takes them in order, past its width.
        let more: Vec<Option<Slot>> = (0..3).map(|_| s.take_more(0, 0, 40, t0)).collect();
        assert_eq!(more, [Some(3), Some(5), None]);
        // Every chunk is in flight on worker 0: nothing is backed up into a wide dispatch.
        assert_eq!(s.tally[0].in_flight, 6);

        // A worker not yet measured fills a dispatch from its own queue only.
        let mut s = Scheduler::new(vec![10; 6], &order, &[0.5, 0.5], vec![None, Some(10.0)]);
        assert_eq!(s.take(0, 0, t0), Take::Chunk(0));
        assert_eq!((s.take_more(0, 0, 10, t0), s.take_more(0, 0, 20, t0)), (Some(2), Some(4)));
        assert_eq!(s.take_more(0, 0, 30, t0), None);
    }

    #[test]
    fn a_failed_workers_chunks_go_back_in_order_and_it_is_retired() {
        let t0 = Instant::now();
        let order: Vec<Slot> = (0..6).collect();
        let mut s = Scheduler::new(vec![1; 6], &order, &[0.5, 0.5], vec![None, None]);
        assert_eq!(s.take(0, 0, t0), Take::Chunk(0));
        assert_eq!(s.take(0, 0, t0), Take::Chunk(2));
        s.fail(0, 0, &[0, 2], "device lost", t0);
        assert!(s.retired[0]);
        assert_eq!(s.take(0, 0, t0), Take::Exit);
        assert_eq!(s.shared, [0, 2, 4]);
        let taken: Vec<Take> = (0..6).map(|_| s.take(1, 0, t0)).collect();
        assert_eq!(
            taken,
            [Take::Chunk(1), Take::Chunk(3), Take::Chunk(5), Take::Chunk(0), Take::Chunk(2), Take::Chunk(4)]
        );
        assert_eq!(s.tally[0].failed.as_deref(), Some("device lost"));
    }
}
