//! Several processes (here: connections on threads, which SQLite locks the same way) opening one
//! new ledger file at the same instant all get it. `noticectl send` run twice at once did not:
//! one of them stopped with "database is locked" while the other was still setting the file up.

use std::sync::Barrier;

use super::*;

#[test]
fn many_openers_of_one_new_file_all_open_it() {
    for round in 0..30 {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("ledger.db");
        let openers = 8;
        let barrier = Barrier::new(openers);
        let failures: Vec<String> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..openers)
                .map(|_| {
                    s.spawn(|| {
                        barrier.wait();
                        SqliteLedger::open(&path).map(|l| l.buckets()).err()
                    })
                })
                .collect();
            handles
                .into_iter()
                .filter_map(|h| h.join().expect("opener thread"))
                .map(|e| e.to_string())
                .collect()
        });
        assert!(failures.is_empty(), "round {round}: {failures:?}");
    }
}
