use super::*;

fn job(jurisdiction: Option<&str>, kind: &str) -> Job {
    let mut v = serde_json::json!({"subscription_id":"s","period_start":"2026-10-01","kind":kind,
        "email":"a@example.com","charge_at":"2026-10-04T09:00:00Z"});
    if let Some(j) = jurisdiction {
        v["jurisdiction"] = j.into();
    }
    Job::from_value(&v, &crate::locale::SimpleTags).unwrap()
}

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn w(opens: u32, closes: u32) -> Window {
    Window { opens_hours_before: opens, closes_hours_before: closes }
}

fn err(json: &str) -> String {
    WindowPolicy::from_json(json).expect_err(json).to_string()
}

/// Both sides bounded in US-CA, a per-kind override for trials there, a floor in US-NY.
const BOTH_SIDES: &str = r#"{
  "default": {"opens_hours_before": 72, "closes_hours_before": 24},
  "kinds": {"annual_renewal": {"opens_hours_before": 1440, "closes_hours_before": 168},
            "trial_conversion": {"opens_hours_before": 720, "closes_hours_before": 48}},
  "jurisdictions": {
    "US-CA": {"opens_at_most_hours_before": 1080, "closes_at_least_hours_before": 48,
              "kinds": {"annual_renewal": {"closes_at_least_hours_before": 360},
                        "trial_conversion": {"opens_at_most_hours_before": 504, "closes_at_least_hours_before": 72}}}},
  "jurisdiction_floors_hours": {"US-NY": 48}
}"#;

#[test]
fn default_window_boundaries() {
    let p = WindowPolicy::default();
    let j = job(None, "renewal_notice_t72");
    // opens 2026-10-01T09:00Z (72 h), closes 2026-10-03T09:00Z (24 h)
    assert_eq!(
        p.decide(&j, at("2026-10-01T08:59:59Z")),
        WindowDecision::Defer { until: at("2026-10-01T09:00:00Z"), closes_at: at("2026-10-03T09:00:00Z") }
    );
    assert!(matches!(p.decide(&j, at("2026-10-01T09:00:00Z")), WindowDecision::Send { .. }));
    assert!(matches!(p.decide(&j, at("2026-10-03T08:59:59Z")), WindowDecision::Send { .. }));
    assert_eq!(
        p.decide(&j, at("2026-10-03T09:00:00Z")),
        WindowDecision::Missed { closed_at: at("2026-10-03T09:00:00Z") }
    );
}

#[test]
fn jurisdiction_floor_raises_close() {
    let p = WindowPolicy::from_json(r#"{"jurisdiction_floors_hours":{"US-NY":48}}"#).unwrap();
    let now = at("2026-10-02T12:00:00Z"); // 45 h before the charge
    assert!(matches!(p.decide(&job(None, "k"), now), WindowDecision::Send { .. }));
    assert!(matches!(p.decide(&job(Some("US-CA"), "k"), now), WindowDecision::Send { .. }));
    assert_eq!(
        p.decide(&job(Some("US-NY"), "k"), now),
        WindowDecision::Missed { closed_at: at("2026-10-02T09:00:00Z") }
    );
    let e = p.effective(Some("k"), Some("US-NY"));
    assert_eq!(e.window, w(72, 48));
    assert_eq!((e.opens_from, e.closes_from), (BoundSource::Default, BoundSource::Floor("US-NY")));
    assert_eq!(e.closes_from.path(Side::Closes), "jurisdiction_floors_hours.US-NY");
}

#[test]
fn per_kind_window() {
    let p = WindowPolicy::from_json(
        r#"{"kinds":{"annual_t30d":{"opens_hours_before":720,"closes_hours_before":168}}}"#,
    )
    .unwrap();
    let now = at("2026-09-20T09:00:00Z");
    assert!(matches!(p.decide(&job(None, "annual_t30d"), now), WindowDecision::Send { .. }));
    assert!(matches!(p.decide(&job(None, "renewal_notice_t72"), now), WindowDecision::Defer { .. }));
}

#[test]
fn old_format_reads_as_before() {
    let old = r#"{"default":{"opens_hours_before":96,"closes_hours_before":24},
        "kinds":{"annual_t30d":{"opens_hours_before":720,"closes_hours_before":168}},
        "jurisdiction_floors_hours":{"US-NY":48,"DE":30}}"#;
    let p = WindowPolicy::from_json(old).unwrap();
    assert_eq!(p.effective(None, None).window, w(96, 24));
    assert_eq!(
        p.effective(Some("annual_t30d"), Some("US-NY")).window,
        w(720, 168),
        "floor below the close: no change"
    );
    assert_eq!(p.effective(Some("other"), Some("US-NY")).window, w(96, 48));
    assert_eq!(p.effective(Some("other"), Some("DE")).window, w(96, 30));
    assert_eq!(p.kinds(), ["annual_t30d"]);
    assert_eq!(p.jurisdictions(), ["DE", "US-NY"]);
    assert_eq!(WindowPolicy::from_json("{}").unwrap(), WindowPolicy::default());
}

/// (kind, jurisdiction) → (window, where its opening came from, where its close came from).
type Case<'a> = (Option<&'a str>, Option<&'a str>, Window, BoundSource<'a>, BoundSource<'a>);

/// Every kind (listed, named only under a jurisdiction, unlisted) × every jurisdiction (none,
/// general bounds, per-kind override, floor only, no entry).
#[test]
fn every_kind_in_every_jurisdiction() {
    let p = WindowPolicy::from_json(BOTH_SIDES).unwrap();
    use BoundSource::*;
    let cases: [Case; 13] = [
        (None, None, w(72, 24), Default, Default),
        (None, Some("US-CA"), w(72, 48), Default, Jurisdiction("US-CA")),
        (None, Some("US-NY"), w(72, 48), Default, Floor("US-NY")),
        (None, Some("FR"), w(72, 24), Default, Default),
        (Some("annual_renewal"), None, w(1440, 168), Kind("annual_renewal"), Kind("annual_renewal")),
        // The per-kind entry sets only the floor; the ceiling falls back to US-CA's general one.
        (
            Some("annual_renewal"),
            Some("US-CA"),
            w(1080, 360),
            Jurisdiction("US-CA"),
            JurisdictionKind("US-CA", "annual_renewal"),
        ),
        (Some("annual_renewal"), Some("US-NY"), w(1440, 168), Kind("annual_renewal"), Kind("annual_renewal")),
        (Some("trial_conversion"), None, w(720, 48), Kind("trial_conversion"), Kind("trial_conversion")),
        (
            Some("trial_conversion"),
            Some("US-CA"),
            w(504, 72),
            JurisdictionKind("US-CA", "trial_conversion"),
            JurisdictionKind("US-CA", "trial_conversion"),
        ),
        (
            Some("trial_conversion"),
            Some("US-NY"),
            w(720, 48),
            Kind("trial_conversion"),
            Kind("trial_conversion"),
        ),
        (Some("unlisted"), Some("US-CA"), w(72, 48), Default, Jurisdiction("US-CA")),
        (Some("unlisted"), Some("US-NY"), w(72, 48), Default, Floor("US-NY")),
        (Some("unlisted"), None, w(72, 24), Default, Default),
    ];
    for (kind, j, window, opens_from, closes_from) in cases {
        let e = p.effective(kind, j);
        assert_eq!(
            (e.window, e.opens_from, e.closes_from),
            (window, opens_from, closes_from),
            "{kind:?} in {j:?}"
        );
    }
    assert_eq!(p.kinds(), ["annual_renewal", "trial_conversion"]);
    assert_eq!(p.jurisdictions(), ["US-CA", "US-NY"]);
    assert_eq!(
        p.effective(Some("trial_conversion"), Some("US-CA")).opens_from.path(Side::Opens),
        "jurisdictions.US-CA.kinds.trial_conversion.opens_at_most_hours_before"
    );
    assert_eq!(
        p.effective(None, Some("US-CA")).closes_from.path(Side::Closes),
        "jurisdictions.US-CA.closes_at_least_hours_before"
    );
    assert_eq!(
        p.effective(Some("annual_renewal"), None).opens_from.path(Side::Opens),
        "kinds.annual_renewal.opens_hours_before"
    );
}

#[test]
fn a_bound_only_narrows_a_window() {
    // A ceiling above the kind's opening and a floor below its close change nothing.
    let p = WindowPolicy::from_json(
        r#"{"jurisdictions":{"BR":{"opens_at_most_hours_before":500,"closes_at_least_hours_before":1}}}"#,
    )
    .unwrap();
    let e = p.effective(Some("k"), Some("BR"));
    assert_eq!(
        (e.window, e.opens_from, e.closes_from),
        (w(72, 24), BoundSource::Default, BoundSource::Default)
    );
}

#[test]
fn decisions_follow_the_jurisdiction_bounds_on_both_sides() {
    let p = WindowPolicy::from_json(BOTH_SIDES).unwrap();
    let charge = at("2026-10-04T09:00:00Z");
    let annual = |j| job(j, "annual_renewal");
    let days_out = |d: i64| charge - Duration::days(d);
    // 50 days out: open by the kind's 60-day window, still shut in California (45 days at most).
    assert!(matches!(p.decide(&annual(None), days_out(50)), WindowDecision::Send { .. }));
    assert_eq!(
        p.decide(&annual(Some("US-CA")), days_out(50)),
        WindowDecision::Defer { until: days_out(45), closes_at: days_out(15) }
    );
    assert!(matches!(p.decide(&annual(Some("US-CA")), days_out(30)), WindowDecision::Send { .. }));
    // 10 days out: open by the kind's 7-day close, closed in California (15 days at least).
    assert!(matches!(p.decide(&annual(None), days_out(10)), WindowDecision::Send { .. }));
    assert_eq!(
        p.decide(&annual(Some("US-CA")), days_out(10)),
        WindowDecision::Missed { closed_at: days_out(15) }
    );
}

#[test]
fn empty_windows_are_start_up_errors_naming_kind_and_jurisdiction() {
    let e = err(r#"{"jurisdiction_floors_hours":{"BR":72}}"#);
    assert!(e.contains("empty") && e.contains("jurisdiction `BR`") && e.contains("`default`"), "{e}");
    let e = err(r#"{"default":{"opens_hours_before":24,"closes_hours_before":24}}"#);
    assert!(e.contains("empty") && e.contains("no jurisdiction"), "{e}");
    // A general bound that empties the default window (the issue's own example shape).
    let e = err(r#"{"jurisdictions":{"US-CA":{"closes_at_least_hours_before":360}}}"#);
    assert!(e.contains("kinds not listed") && e.contains("`US-CA`"), "{e}");
    assert!(e.contains("jurisdictions.US-CA.closes_at_least_hours_before"), "{e}");
    // A per-kind bound under a jurisdiction for a kind without its own window: the default's.
    let e = err(
        r#"{"jurisdictions":{"US-CA":{"kinds":{"trial_conversion":{"closes_at_least_hours_before":72}}}}}"#,
    );
    assert!(e.contains("kind `trial_conversion`") && e.contains("jurisdiction `US-CA`"), "{e}");
    // The issue's example as written: US-CA's 360 h floor leaves the 72 h default window empty.
    let issue = r#"{ "default": {"opens_hours_before": 72, "closes_hours_before": 24},
      "kinds": {"annual_renewal": {"opens_hours_before": 1080, "closes_hours_before": 360}},
      "jurisdictions": {"US-CA": {"opens_at_most_hours_before": 1080, "closes_at_least_hours_before": 360,
          "kinds": {"trial_conversion": {"opens_at_most_hours_before": 504, "closes_at_least_hours_before": 72}}}},
      "jurisdiction_floors_hours": {"US-NY": 48} }"#;
    assert!(err(issue).contains("empty"));
}

#[test]
fn a_ceiling_at_or_below_the_floor_is_an_error_naming_the_field() {
    let e = err(r#"{"kinds":{"k":{"opens_hours_before":900,"closes_hours_before":24}},
        "jurisdictions":{"US-CA":{"kinds":{"k":{"opens_at_most_hours_before":72,"closes_at_least_hours_before":504}}}}}"#);
    assert!(
        e.contains("`jurisdictions.US-CA.kinds.k.opens_at_most_hours_before` (72 h) must be greater than"),
        "{e}"
    );
    let e = err(
        r#"{"jurisdictions":{"BR":{"opens_at_most_hours_before":40}}, "jurisdiction_floors_hours":{"BR":40}}"#,
    );
    assert!(
        e.contains("`jurisdictions.BR.opens_at_most_hours_before`")
            && e.contains("`jurisdiction_floors_hours.BR`"),
        "{e}"
    );
}

#[test]
fn bad_numbers_name_their_field() {
    let path = "jurisdictions.US-CA.kinds.trial_conversion.opens_at_most_hours_before";
    let doc = |v: &str| {
        format!(
            r#"{{"jurisdictions":{{"US-CA":{{"kinds":{{"trial_conversion":{{"opens_at_most_hours_before":{v}}}}}}}}}}}"#
        )
    };
    for (value, says) in [
        ("-1", "must not be negative"),
        ("1.5", "whole number"),
        ("\"72\"", "whole number"),
        ("true", "whole number"),
        ("4294967296", "at most"),
    ] {
        let e = err(&doc(value));
        assert!(e.contains(&format!("`{path}`")) && e.contains(says), "{value}: {e}");
    }
    let e = err(r#"{"kinds":{"k":{"opens_hours_before":72}}}"#);
    assert!(e.contains("`kinds.k.closes_hours_before` is required"), "{e}");
    let e = err(r#"{"jurisdiction_floors_hours":{"US-NY":-48}}"#);
    assert!(e.contains("`jurisdiction_floors_hours.US-NY` must not be negative"), "{e}");
    let e = err(r#"{"default":{"opens_hours_before":72.0,"closes_hours_before":24}}"#);
    assert!(e.contains("`default.opens_hours_before` must be a whole number"), "{e}");
}

#[test]
fn unknown_fields_name_their_path() {
    for (json, path) in [
        (r#"{"defualt":{}}"#, "`defualt`"),
        (r#"{"default":{"opens_hours_before":72,"closes_hours_before":24,"open":1}}"#, "`default.open`"),
        (r#"{"jurisdictions":{"US-CA":{"closes_at_least":1}}}"#, "`jurisdictions.US-CA.closes_at_least`"),
        (
            r#"{"jurisdictions":{"US-CA":{"kinds":{"k":{"opens_hours_before":1}}}}}"#,
            "`jurisdictions.US-CA.kinds.k.opens_hours_before`",
        ),
    ] {
        let e = err(json);
        assert!(e.contains("unknown field") && e.contains(path), "{json}: {e}");
    }
}

#[test]
fn other_shapes_are_refused_plainly() {
    assert!(err("[]").contains("must be a JSON object"));
    assert!(err("{").contains("not valid JSON"));
    assert!(err(r#"{"kinds":{"Annual":{"opens_hours_before":72,"closes_hours_before":24}}}"#)
        .contains("`kinds.Annual`"));
    assert!(err(r#"{"jurisdictions":{"US CA":{}}}"#).contains("not an ISO 3166-1 alpha-2 country"));
    assert!(err(r#"{"description":7}"#).contains("`description` must be a string"));
    let e = err(
        r#"{"jurisdictions":{"US-NY":{"closes_at_least_hours_before":48}},"jurisdiction_floors_hours":{"US-NY":48}}"#,
    );
    assert!(e.contains("keep one"), "{e}");
}

#[test]
fn descriptions_are_kept_and_ignored_by_the_decision() {
    let p = WindowPolicy::from_json(
        r#"{"description":"top","jurisdictions":{"US-CA":{"description":"ca","kinds":{"k":{"description":"ca k"}}}}}"#,
    )
    .unwrap();
    let notes: Vec<(&str, &str)> = p.descriptions().iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    assert_eq!(notes, [("", "top"), ("jurisdictions.US-CA", "ca"), ("jurisdictions.US-CA.kinds.k", "ca k")]);
    assert_eq!(p.effective(Some("k"), Some("US-CA")).window, w(72, 24));
}

#[test]
fn the_example_policy_is_valid() {
    let p = WindowPolicy::from_json(include_str!("../../../../docs/windows/us-ca-arl.json")).unwrap();
    assert_eq!(p.effective(Some("annual_renewal"), Some("US-CA")).window, w(1080, 360));
    assert_eq!(p.effective(Some("trial_conversion"), Some("US-CA")).window, w(504, 72));
    assert!(!p.descriptions().is_empty(), "the example carries its references and its caveat");
}

#[test]
fn the_example_policy_bounds_price_changes_in_california_and_new_york() {
    let p = WindowPolicy::from_json(include_str!("../../../../docs/windows/us-ca-arl.json")).unwrap();
    assert_eq!(p.other_kinds(), OtherKinds::Refuse, "the example lists its kinds: others are refused");
    assert_eq!(p.effective(Some("price_change"), None).window, w(720, 120));
    assert_eq!(p.effective(Some("price_change"), Some("US-CA")).window, w(720, 168), "CA: 30 to 7 days");
    assert_eq!(p.effective(Some("price_change"), Some("US-NY")).window, w(720, 120), "NY: 30 to 5 days");
    let ca: Vec<String> =
        p.requirements("annual_renewal", Some("US-CA")).into_iter().map(|r| r.variable).collect();
    assert_eq!(ca, ["plan_name", "amount", "charge_date", "manage_url"]);
    assert!(p.requirements("renewal_notice_t72", Some("US-CA")).is_empty());
}

/// A policy that lists two kinds, requires content in California, and one that accepts others.
const STRICT: &str = r#"{
  "default": {"opens_hours_before": 72, "closes_hours_before": 24, "requires": ["manage_url"]},
  "kinds": {"annual_renewal": {"opens_hours_before": 1440, "closes_hours_before": 168, "requires": ["amount"]}},
  "jurisdictions": {
    "US-CA": {"requires": ["charge_date", "amount"],
              "kinds": {"trial_conversion": {"closes_at_least_hours_before": 48, "requires": ["plan_name"]}}}}
}"#;

#[test]
fn a_policy_that_lists_kinds_refuses_others_naming_the_closest() {
    let p = WindowPolicy::from_json(STRICT).unwrap();
    assert_eq!(p.other_kinds(), OtherKinds::Refuse);
    assert_eq!(p.check_kind("annual_renewal"), Ok(()));
    assert_eq!(p.check_kind("trial_conversion"), Ok(()), "a kind named only under a jurisdiction is known");
    let e = p.check_kind("annual_renewl").unwrap_err();
    assert_eq!(e.suggestion.as_deref(), Some("annual_renewal"));
    assert_eq!(
        e.to_string(),
        r#"names an unknown kind "annual_renewl" (did you mean "annual_renewal"?); the policy knows: annual_renewal, trial_conversion"#
    );
    let far = p.check_kind("welcome_email").unwrap_err();
    assert_eq!(far.suggestion, None, "nothing close: no guess");
    let invalid: crate::InvalidJob = far.into();
    assert_eq!(invalid.field, "kind");

    let lenient = STRICT.replacen('{', r#"{"other_kinds": "default","#, 1);
    let p = WindowPolicy::from_json(&lenient).unwrap();
    assert_eq!(p.check_kind("welcome_email"), Ok(()), "other_kinds: default keeps the old behaviour");
    assert_eq!(p.effective(Some("welcome_email"), None).window, w(72, 24));
    assert_eq!(WindowPolicy::default().check_kind("anything_at_all"), Ok(()), "the built-in policy");
    let floors_only = WindowPolicy::from_json(r#"{"jurisdiction_floors_hours":{"US-NY":48}}"#).unwrap();
    assert_eq!(floors_only.check_kind("anything_at_all"), Ok(()), "a policy naming no kinds");

    let e = err(r#"{"other_kinds":"refuse"}"#);
    assert!(e.contains("lists no kinds"), "{e}");
    let e = err(r#"{"other_kinds":"ignore","kinds":{"k":{"opens_hours_before":2,"closes_hours_before":1}}}"#);
    assert!(e.contains("`other_kinds` must be"), "{e}");
}

#[test]
fn requirements_add_up_and_name_the_field_that_requires_them() {
    let p = WindowPolicy::from_json(STRICT).unwrap();
    let of = |kind, j| {
        p.requirements(kind, j)
            .into_iter()
            .map(|r| format!("{} ({})", r.variable, r.path))
            .collect::<Vec<_>>()
    };
    assert_eq!(of("renewal", None), ["manage_url (default.requires)"]);
    assert_eq!(
        of("annual_renewal", None),
        ["manage_url (default.requires)", "amount (kinds.annual_renewal.requires)"]
    );
    assert_eq!(
        of("trial_conversion", Some("US-CA")),
        [
            "manage_url (default.requires)",
            "charge_date (jurisdictions.US-CA.requires)",
            "amount (jurisdictions.US-CA.requires)",
            "plan_name (jurisdictions.US-CA.kinds.trial_conversion.requires)",
        ]
    );
    assert_eq!(of("trial_conversion", Some("US-NY")), ["manage_url (default.requires)"]);
}

#[test]
fn missing_or_empty_content_is_refused_and_defaults_never_stand_in() {
    let p = WindowPolicy::from_json(STRICT).unwrap();
    let job = job(Some("us-ca"), "trial_conversion");
    let vars = |pairs: serde_json::Value| pairs.as_object().cloned().unwrap();
    let full = vars(
        serde_json::json!({"manage_url": "https://m", "charge_date": "1 Oct", "amount": {"minor": 900, "currency": "USD"},
        "plan_name": "Tea"}),
    );
    assert_eq!(p.check_content(&job, &full), Ok(()));
    for (missing, value) in [
        ("plan_name", serde_json::Value::Null),
        ("amount", serde_json::json!("  ")),
        ("amount", serde_json::json!({})),
        ("charge_date", serde_json::json!([])),
    ] {
        let mut v = full.clone();
        v.insert(missing.into(), value.clone());
        let e = p.check_content(&job, &v).unwrap_err();
        assert_eq!(e.variable, missing, "{value}");
        assert_eq!(e.jurisdiction.as_deref(), Some("US-CA"));
        let text = crate::InvalidJob::from(e).to_string();
        assert!(
            text.contains(missing) && text.contains("trial_conversion") && text.contains("US-CA"),
            "{text}"
        );
    }
    let mut v = full.clone();
    v.remove("plan_name");
    let e = p.check_content(&job, &v).unwrap_err();
    assert_eq!(e.path, "jurisdictions.US-CA.kinds.trial_conversion.requires");
    assert_eq!(
        e.to_string(),
        r#"has no "plan_name" (missing or empty), which a notice of kind trial_conversion in US-CA must carry (`jurisdictions.US-CA.kinds.trial_conversion.requires`)"#
    );
    // `admit` asks for the variables only when something is required.
    let none_required = WindowPolicy::default();
    assert_eq!(none_required.admit(&job, || unreachable!("no requirement: no variables built")), Ok(()));
    assert!(matches!(p.admit(&job, serde_json::Map::new), Err(Refusal::MissingContent(_))));
    let unknown = self::job(None, "annual_renewl");
    assert!(matches!(p.admit(&unknown, || full.clone()), Err(Refusal::UnknownKind(_))));
}

#[test]
fn requires_must_be_a_list_of_variable_names() {
    for (json, expect) in [
        (
            r#"{"default":{"opens_hours_before":2,"closes_hours_before":1,"requires":"amount"}}"#,
            "`default.requires` must be a list",
        ),
        (r#"{"jurisdictions":{"US-CA":{"requires":[7]}}}"#, "`jurisdictions.US-CA.requires[0]`"),
        (r#"{"jurisdictions":{"US-CA":{"requires":["plan name"]}}}"#, "is not a template variable name"),
        (r#"{"jurisdictions":{"US-CA":{"requires":["amount","amount"]}}}"#, "lists \"amount\" twice"),
        (
            r#"{"jurisdictions":{"US-CA":{"kinds":{"k":{"requires":["1x"]}}}}}"#,
            "`jurisdictions.US-CA.kinds.k.requires[0]`",
        ),
    ] {
        let e = err(json);
        assert!(e.contains(expect), "{json}: {e}");
    }
}

#[test]
fn policy_jurisdictions_are_iso_codes_in_upper_case() {
    let e = err(r#"{"jurisdictions":{"us-ca":{}}}"#);
    assert!(e.contains("`jurisdictions.us-ca`") && e.contains("as `US-CA`"), "{e}");
    let e = err(r#"{"jurisdiction_floors_hours":{"US-CAL":48}}"#);
    assert!(e.contains("`jurisdiction_floors_hours.US-CAL`") && e.contains("ISO 3166-2"), "{e}");
    let e = err(r#"{"jurisdictions":{"XX":{}}}"#);
    assert!(e.contains("`jurisdictions.XX`") && e.contains("ISO 3166-1"), "{e}");
    let p =
        WindowPolicy::from_json(r#"{"jurisdiction_floors_hours":{"US-NY":48},"jurisdictions":{"DE":{}}}"#)
            .unwrap();
    assert!(p.names_jurisdiction("US-NY") && p.names_jurisdiction("DE"));
    assert!(!p.names_jurisdiction("US-CA"));
}

proptest::proptest! {
    /// A job's jurisdiction in any casing gets exactly the window of its upper-case code.
    #[test]
    fn any_casing_of_a_code_gives_the_same_window(
        code in proptest::sample::select(vec!["US-CA", "US-NY", "FR", "DE-BY", "GB-ENG", "AU-NSW"]),
        mask in proptest::collection::vec(proptest::bool::ANY, 6),
        kind in proptest::sample::select(vec!["annual_renewal", "trial_conversion", "renewal"]),
    ) {
        let p = WindowPolicy::from_json(BOTH_SIDES).unwrap();
        let cased: String = code
            .chars()
            .zip(mask.iter().chain(std::iter::repeat(&false)))
            .map(|(c, lower)| if *lower { c.to_ascii_lowercase() } else { c })
            .collect();
        let j = job(Some(&cased), kind);
        proptest::prop_assert_eq!(j.jurisdiction.as_deref(), Some(code));
        proptest::prop_assert_eq!(p.window_for(&j), p.effective(Some(kind), Some(code)).window);
    }
}
