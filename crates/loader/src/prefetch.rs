//! The prefetch queue: a producer thread reads ahead into a queue bounded
//! by bytes, the consumer takes from it.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};

/// The most items the queue holds, whatever their weight (markers weigh
/// nothing).
const MAX_ITEMS: usize = 4096;

/// A queue of items, each weighing some bytes, that holds at most `budget`
/// bytes (or a single item heavier than that, so that nothing is stuck)
/// and at most [`MAX_ITEMS`] items.
#[derive(Debug)]
pub(crate) struct Queue<T> {
    budget: u64,
    state: Mutex<State<T>>,
    /// Signalled when room appears (or the queue is cancelled).
    room: Condvar,
    /// Signalled when an item arrives (or the producer finishes).
    ready: Condvar,
}

#[derive(Debug)]
struct State<T> {
    items: VecDeque<(T, u64)>,
    bytes: u64,
    peak: u64,
    /// The consumer went away: the producer stops.
    cancelled: bool,
    /// The producer finished: nothing more will come.
    finished: bool,
}

/// The consumer went away.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Cancelled;

/// What [`Queue::try_push`] found.
#[cfg(test)]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TryPush<T> {
    Pushed,
    /// No room: the item is handed back.
    Full(T),
    Cancelled,
}

impl<T> Queue<T> {
    pub(crate) fn new(budget: u64) -> Self {
        Queue {
            budget,
            state: Mutex::new(State {
                items: VecDeque::new(),
                bytes: 0,
                peak: 0,
                cancelled: false,
                finished: false,
            }),
            room: Condvar::new(),
            ready: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // A panic while holding the lock cannot leave the state
        // inconsistent (every update is a single step), so a poisoned lock
        // is used as is.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn fits(&self, s: &State<T>, bytes: u64) -> bool {
        s.items.is_empty()
            || (s.bytes.saturating_add(bytes) <= self.budget && s.items.len() < MAX_ITEMS)
    }

    fn put(s: &mut State<T>, item: T, bytes: u64) {
        s.items.push_back((item, bytes));
        s.bytes += bytes;
        s.peak = s.peak.max(s.bytes);
    }

    /// Adds `item`, waiting for room.
    pub(crate) fn push(&self, item: T, bytes: u64) -> Result<(), Cancelled> {
        let mut s = self.lock();
        while !s.cancelled && !self.fits(&s, bytes) {
            s = self.room.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        if s.cancelled {
            return Err(Cancelled);
        }
        Self::put(&mut s, item, bytes);
        self.ready.notify_one();
        Ok(())
    }

    /// Adds `item` if there is room now.
    #[cfg(test)]
    pub(crate) fn try_push(&self, item: T, bytes: u64) -> TryPush<T> {
        let mut s = self.lock();
        if s.cancelled {
            return TryPush::Cancelled;
        }
        if !self.fits(&s, bytes) {
            return TryPush::Full(item);
        }
        Self::put(&mut s, item, bytes);
        self.ready.notify_one();
        TryPush::Pushed
    }

    /// The next item, waiting for one; `None` once the producer finished
    /// and everything was taken.
    pub(crate) fn pop(&self) -> Option<T> {
        let mut s = self.lock();
        loop {
            if let Some((item, bytes)) = s.items.pop_front() {
                s.bytes -= bytes;
                self.room.notify_one();
                return Some(item);
            }
            if s.finished {
                return None;
            }
            s = self.ready.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// The producer is done.
    pub(crate) fn finish(&self) {
        self.lock().finished = true;
        self.ready.notify_all();
    }

    /// The consumer is done: a waiting producer stops, queued items are
    /// dropped.
    pub(crate) fn cancel(&self) {
        let mut s = self.lock();
        s.cancelled = true;
        s.items.clear();
        s.bytes = 0;
        drop(s);
        self.room.notify_all();
    }

    /// The most bytes the queue ever held.
    pub(crate) fn peak(&self) -> u64 {
        self.lock().peak
    }

    /// The bytes queued now.
    #[cfg(test)]
    pub(crate) fn queued(&self) -> u64 {
        self.lock().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn holds_at_most_the_budget() {
        let q = Queue::new(25);
        assert_eq!(q.try_push(1, 10), TryPush::Pushed);
        assert_eq!(q.try_push(2, 10), TryPush::Pushed);
        assert_eq!(q.try_push(3, 10), TryPush::Full(3));
        assert_eq!(q.queued(), 20);
        assert_eq!(q.pop(), Some(1));
        assert_eq!(q.try_push(3, 10), TryPush::Pushed);
        assert_eq!(q.peak(), 20);
        // An item over the budget passes alone.
        assert_eq!(q.pop(), Some(2));
        assert_eq!(q.pop(), Some(3));
        assert_eq!(q.try_push(4, 100), TryPush::Pushed);
        assert_eq!(q.try_push(5, 1), TryPush::Full(5));
        assert_eq!(q.peak(), 100);
    }

    #[test]
    fn a_blocked_producer_resumes_or_stops() {
        let q = Arc::new(Queue::new(10));
        q.push(0u32, 10).unwrap();
        let producer = {
            let q = q.clone();
            std::thread::spawn(move || {
                let mut pushed = 0;
                for i in 1..=5u32 {
                    if q.push(i, 10).is_err() {
                        break;
                    }
                    pushed += 1;
                }
                q.finish();
                pushed
            })
        };
        // Each pop makes room for exactly one more item.
        for want in 0..3u32 {
            assert_eq!(q.pop(), Some(want));
            assert!(q.queued() <= 10);
        }
        q.cancel();
        let pushed = producer.join().unwrap();
        assert!((2..=3).contains(&pushed), "{pushed}");
        assert_eq!(q.pop(), None);
    }
}
