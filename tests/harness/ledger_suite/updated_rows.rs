//! The operator's read of the rows written in a time range (`rows_updated_between`), page by page:
//! what `noticectl outcomes republish` rebuilds outcome events from.

use std::collections::BTreeSet;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use notice_ledger::ledger::{Ledger, RowState};
use notice_ledger::NoticeKey;

use super::{fresh_key, mint, request, t, withdraw_request};

/// Every row of `[since, until)` through pages of `limit`: (key, state) pairs and the page count.
async fn read_all(
    ledger: &dyn Ledger,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
    limit: usize,
) -> (Vec<(NoticeKey, RowState)>, usize) {
    let mut cursor: Option<String> = None;
    let mut found = Vec::new();
    let mut pages = 0;
    loop {
        let page = ledger
            .rows_updated_between(since, until, cursor.as_deref(), limit)
            .await
            .unwrap_or_else(|e| panic!("rows_updated_between: {e}"));
        pages += 1;
        assert!(page.rows.len() <= limit, "a page holds at most {limit} rows: {}", page.rows.len());
        found.extend(page.rows.iter().map(|r| (r.key.clone(), r.state)));
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
        assert!(pages < 100, "the pages never end");
    }
    (found, pages)
}

/// Rows are found by their last write, `since` inclusive and `until` exclusive, each exactly once
/// however the range is paged; rows written outside it are not.
pub async fn rows_are_read_by_the_time_of_their_last_write(ledger: Arc<dyn Ledger>) {
    let l = &*ledger;
    let (sent, missed, withdrawn, at_since, at_until, before, later) =
        (fresh_key(), fresh_key(), fresh_key(), fresh_key(), fresh_key(), fresh_key(), fresh_key());
    // Claimed before the range, committed inside it: found (by the commit).
    let claim = mint(l, &request(&sent, t(5))).await;
    l.commit_sent(&claim, "ses-1", t(11)).await.expect("commit");
    assert!(l.record_missed(&request(&missed, t(20)), "late").await.expect("missed").is_none());
    assert!(l.withdraw(&withdraw_request(&withdrawn, t(30))).await.expect("withdraw").is_none());
    assert!(l.record_missed(&request(&at_since, t(10)), "late").await.expect("missed").is_none());
    assert!(l.record_missed(&request(&at_until, t(40)), "late").await.expect("missed").is_none());
    assert!(l.record_missed(&request(&before, t(9)), "late").await.expect("missed").is_none());
    // Claimed inside the range, committed after it: not found (its last write is later).
    let claim = mint(l, &request(&later, t(15))).await;
    l.commit_sent(&claim, "ses-2", t(60)).await.expect("commit");

    let expected: BTreeSet<(NoticeKey, RowState)> = [
        (sent.clone(), RowState::Sent),
        (missed.clone(), RowState::Missed),
        (withdrawn.clone(), RowState::Withdrawn),
        (at_since.clone(), RowState::Missed),
    ]
    .into_iter()
    .collect();
    for limit in [1, 2, 3, 500] {
        let (found, pages) = read_all(l, t(10), t(40), limit).await;
        let set: BTreeSet<(NoticeKey, RowState)> = found.iter().cloned().collect();
        assert_eq!(set.len(), found.len(), "limit {limit}: a row came twice: {found:?}");
        assert_eq!(set, expected, "limit {limit}");
        if limit == 1 {
            assert!(pages >= 4, "one row a page: {pages} page(s)");
        }
    }
    let (found, _) = read_all(l, t(100), t(200), 10).await;
    assert!(found.is_empty(), "nothing was written then: {found:?}");
    let page = l.rows_updated_between(t(10), t(40), None, 500).await.expect("read");
    let row = page.rows.iter().find(|r| r.key == sent).unwrap_or_else(|| panic!("the sent row"));
    assert_eq!((row.message_id.as_deref(), row.subscription_id.as_str()), (Some("ses-1"), "sub_8812"));
}
