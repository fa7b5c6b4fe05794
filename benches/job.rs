//! The job both the CPU bench and the footprint bench send: one distinct notice per `i`, inside its
//! window on 2026-10-02 (a 72 h reminder for a charge on 2026-10-04), so that two benches measure
//! the same work.

pub fn body(i: u64) -> String {
    serde_json::json!({
        "subscription_id": format!("sub_{i:08}"),
        "period_start": "2026-10-04",
        "kind": "renewal_notice_t72",
        "email": format!("customer{i}@example.com"),
        "charge_at": "2026-10-04T09:00:00Z",
        "template_data": { "plan_name": "Coffee Box", "amount": {"minor": 2900, "currency": "USD"} },
    })
    .to_string()
}
