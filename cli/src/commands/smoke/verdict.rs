//! What a probe's ledger row says: passed, not yet, or failed — pure, so every rule is tested on
//! rows without a stack.

use notice_ledger::ledger::{DeliveryStatus, LedgerRow, RowState};

use super::plan::Expect;

/// One check's state while the run waits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Pass(String),
    /// Not there yet (what is awaited): a timeout turns it into a failure.
    Pending(String),
    Fail(String),
}

impl Verdict {
    pub(crate) fn is_settled(&self) -> bool {
        !matches!(self, Verdict::Pending(_))
    }

    pub(crate) fn label(&self) -> &'static str {
        match self {
            Verdict::Pass(_) => "PASS",
            Verdict::Pending(_) => "WAIT",
            Verdict::Fail(_) => "FAIL",
        }
    }

    pub(crate) fn text(&self) -> &str {
        match self {
            Verdict::Pass(t) | Verdict::Pending(t) | Verdict::Fail(t) => t,
        }
    }

    /// At the deadline, what is still awaited is a failure naming what never came.
    pub(crate) fn timed_out(self, waited_secs: u64) -> Self {
        match self {
            Verdict::Pending(what) => Verdict::Fail(format!("timed out after {waited_secs} s: {what}")),
            settled => settled,
        }
    }
}

/// The verdict on a probe's row.
pub(crate) fn judge(expect: Expect, row: Option<&LedgerRow>) -> Verdict {
    let Some(row) = row else {
        return match expect {
            Expect::Withdrawn => Verdict::Pending("waiting for the withdraw's tombstone".into()),
            _ => Verdict::Pending("no row yet: the sender has not claimed it".into()),
        };
    };
    if !row.duplicate_message_ids.is_empty() {
        return Verdict::Fail(format!(
            "sent more than once: {} and {} (DuplicateSendsDetected)",
            row.message_id.as_deref().unwrap_or("?"),
            row.duplicate_message_ids.join(", ")
        ));
    }
    let detail = || row.detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default();
    match (expect, row.state) {
        (Expect::Withdrawn, RowState::Withdrawn) => match &row.message_id {
            None => Verdict::Pass("withdrawn, never sent (both copies of its job refused)".into()),
            Some(id) => Verdict::Fail(format!("withdrawn, but a message went out ({id})")),
        },
        (Expect::Withdrawn, state) => {
            Verdict::Fail(format!("{state}, not withdrawn: the withdraw did not stop the notice{}", detail()))
        }
        (_, RowState::Claimed) => Verdict::Pending("claimed: waiting for the send's commit".into()),
        (_, RowState::Sent) => judge_sent(expect, row),
        (_, state) => Verdict::Fail(format!("{state}, not sent{}", detail())),
    }
}

fn judge_sent(expect: Expect, row: &LedgerRow) -> Verdict {
    let id = row.message_id.as_deref().unwrap_or("?");
    let status = row.delivery_status;
    let wanted = match expect {
        Expect::Delivered => {
            matches!(status, Some(DeliveryStatus::Delivered | DeliveryStatus::Engaged))
        }
        Expect::Bounced => status == Some(DeliveryStatus::Bounced),
        Expect::Complained => status == Some(DeliveryStatus::Complained),
        Expect::Withdrawn => false,
    };
    if wanted {
        let status = status.map_or("-", |s| s.as_str());
        return Verdict::Pass(format!("sent once ({id}), {status} (reconciled from SES's events)"));
    }
    let waiting = match status {
        None | Some(DeliveryStatus::Accepted | DeliveryStatus::Delayed) => true,
        // The simulator's complaint follows its delivery.
        Some(DeliveryStatus::Delivered) => expect == Expect::Complained,
        _ => false,
    };
    let seen = status.map_or("no event yet", |s| s.as_str());
    if waiting {
        Verdict::Pending(format!("sent once ({id}); waiting for the {} event (now: {seen})", expect.name()))
    } else {
        Verdict::Fail(format!("sent once ({id}), but {seen}, not {}", expect.name()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use notice_ledger::ledger::Origin;
    use notice_ledger::NoticeKey;

    fn row(state: RowState, status: Option<DeliveryStatus>) -> LedgerRow {
        LedgerRow {
            key: NoticeKey::parse(&"ab".repeat(32)).unwrap_or_else(|e| panic!("{e}")),
            state,
            origin: Origin::Worker,
            claim_token: None,
            subscription_id: "smoke-x-delivered".into(),
            period_start: "2026-12-04".into(),
            kind: "renewal_notice_t72".into(),
            revision: 0,
            content_digest: None,
            claimed_at: None,
            on_quarantine_view: false,
            updated_at: Utc::now(),
            message_id: (state == RowState::Sent).then(|| "m-1".to_owned()),
            detail: None,
            delivery_status: status,
            duplicate_message_ids: Vec::new(),
            charge_at: None,
            jurisdiction: None,
            rendered: None,
            obligation: None,
        }
    }

    #[test]
    fn each_expectation_passes_on_its_own_end_only() {
        use DeliveryStatus::*;
        let sent = |s| row(RowState::Sent, Some(s));
        assert!(matches!(judge(Expect::Delivered, Some(&sent(Delivered))), Verdict::Pass(_)));
        assert!(matches!(judge(Expect::Bounced, Some(&sent(Bounced))), Verdict::Pass(_)));
        assert!(matches!(judge(Expect::Complained, Some(&sent(Complained))), Verdict::Pass(_)));
        assert!(matches!(judge(Expect::Complained, Some(&sent(Delivered))), Verdict::Pending(_)));
        assert!(matches!(judge(Expect::Bounced, Some(&sent(Accepted))), Verdict::Pending(_)));
        assert!(matches!(judge(Expect::Delivered, Some(&sent(Bounced))), Verdict::Fail(_)));
        assert!(matches!(judge(Expect::Bounced, Some(&sent(Delivered))), Verdict::Fail(_)));
        let tombstone = row(RowState::Withdrawn, None);
        assert!(matches!(judge(Expect::Withdrawn, Some(&tombstone)), Verdict::Pass(_)));
        assert!(matches!(judge(Expect::Withdrawn, Some(&sent(Delivered))), Verdict::Fail(_)));
        assert!(matches!(judge(Expect::Withdrawn, None), Verdict::Pending(_)));
        assert!(matches!(judge(Expect::Delivered, None), Verdict::Pending(_)));
        assert!(matches!(judge(Expect::Delivered, Some(&row(RowState::Claimed, None))), Verdict::Pending(_)));
        assert!(matches!(judge(Expect::Delivered, Some(&row(RowState::Missed, None))), Verdict::Fail(_)));
    }

    #[test]
    fn a_second_message_fails_whatever_else_the_row_says() {
        let mut twice = row(RowState::Sent, Some(DeliveryStatus::Delivered));
        twice.duplicate_message_ids = vec!["m-2".into()];
        let verdict = judge(Expect::Delivered, Some(&twice));
        assert!(matches!(&verdict, Verdict::Fail(t) if t.contains("m-1 and m-2")), "{verdict:?}");
    }

    #[test]
    fn what_never_came_fails_at_the_deadline_naming_it() {
        let late = judge(Expect::Bounced, Some(&row(RowState::Sent, Some(DeliveryStatus::Accepted))));
        let failed = late.timed_out(600);
        assert!(
            matches!(&failed, Verdict::Fail(t) if t.starts_with("timed out after 600 s") && t.contains("bounced"))
        );
        let pass = Verdict::Pass("x".into());
        assert_eq!(pass.clone().timed_out(1), pass);
    }
}
