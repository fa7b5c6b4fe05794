//! The MX rollup against a DNS server on the loopback (never the internet): a hit, a miss, a
//! server that never answers, a record whose TTL runs out — counting the queries the server sees —
//! and the rate gate placing a batch's domains through it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hickory_resolver::proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_resolver::proto::rr::rdata::{MX, SOA};
use hickory_resolver::proto::rr::{Name, RData, Record};
use notice_dns::{MxResolver, FAILURE_PAUSE, QUERY_DEADLINE};
use notice_ledger::metrics::Metrics;
use notice_ledger::rate::providers::Provider;
use notice_ledger::rate::{
    Admission, BucketGate, BucketStore, MxLookup, MxLookupError, RateGate, RateLimits, TokenRequest,
    MX_LOOKUP_BOUND,
};
use tokio::net::UdpSocket;

/// How the local server answers for a domain.
#[derive(Clone, Debug)]
enum Zone {
    /// These MX hosts (preference in order), with this TTL.
    Mx { hosts: Vec<&'static str>, ttl: u32 },
    /// NXDOMAIN, with an SOA whose negative TTL is `negative_ttl`.
    NxDomain { negative_ttl: u32 },
    /// SERVFAIL.
    ServFail,
    /// Nothing at all: the query is read and dropped.
    Silent,
}

/// A DNS server on 127.0.0.1 (a random port) answering from `zones`, counting the queries per
/// domain. Stops when dropped.
struct LocalDns {
    addr: SocketAddr,
    zones: Arc<Mutex<HashMap<String, Zone>>>,
    queries: Arc<Mutex<HashMap<String, usize>>>,
    task: tokio::task::JoinHandle<()>,
}

impl LocalDns {
    async fn start(zones: impl IntoIterator<Item = (&'static str, Zone)>) -> Self {
        let socket = UdpSocket::bind("127.0.0.1:0").await.expect("a loopback UDP port");
        let addr = socket.local_addr().expect("its address");
        let zones = Arc::new(Mutex::new(zones.into_iter().map(|(d, z)| (d.to_owned(), z)).collect()));
        let queries = Arc::new(Mutex::new(HashMap::new()));
        let task = tokio::spawn(serve(socket, Arc::clone(&zones), Arc::clone(&queries)));
        Self { addr, zones, queries, task }
    }

    fn queries(&self, domain: &str) -> usize {
        self.queries.lock().unwrap().get(domain).copied().unwrap_or(0)
    }

    fn set(&self, domain: &'static str, zone: Zone) {
        self.zones.lock().unwrap().insert(domain.to_owned(), zone);
    }

    fn resolver(&self) -> MxResolver {
        MxResolver::with_name_server(self.addr).expect("a resolver for the local server")
    }
}

impl Drop for LocalDns {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(
    socket: UdpSocket,
    zones: Arc<Mutex<HashMap<String, Zone>>>,
    queries: Arc<Mutex<HashMap<String, usize>>>,
) {
    let mut buf = vec![0u8; 4096];
    loop {
        let Ok((len, from)) = socket.recv_from(&mut buf).await else { return };
        let Ok(request) = Message::from_vec(&buf[..len]) else { continue };
        let Some(query) = request.queries.first().cloned() else { continue };
        let domain = query.name().to_ascii().trim_end_matches('.').to_ascii_lowercase();
        *queries.lock().unwrap().entry(domain.clone()).or_default() += 1;
        let zone = zones.lock().unwrap().get(&domain).cloned().unwrap_or(Zone::NxDomain { negative_ttl: 60 });
        let mut response = Message::new(request.metadata.id, MessageType::Response, OpCode::Query);
        response.metadata.recursion_desired = request.metadata.recursion_desired;
        response.metadata.recursion_available = true;
        response.add_query(query.clone());
        response.edns = request.edns.clone();
        match zone {
            Zone::Silent => continue,
            Zone::ServFail => response.metadata.response_code = ResponseCode::ServFail,
            Zone::NxDomain { negative_ttl } => {
                response.metadata.response_code = ResponseCode::NXDomain;
                let soa = SOA::new(
                    Name::from_ascii("ns.test.").unwrap(),
                    Name::from_ascii("hostmaster.test.").unwrap(),
                    1,
                    3600,
                    600,
                    86_400,
                    negative_ttl,
                );
                let apex = Name::from_ascii("example.").unwrap();
                response.add_authority(Record::from_rdata(apex, negative_ttl, RData::SOA(soa)));
            }
            Zone::Mx { hosts, ttl } => {
                for (i, host) in hosts.iter().enumerate() {
                    let mx = MX::new(10 * (i as u16 + 1), Name::from_ascii(format!("{host}.")).unwrap());
                    response.add_answer(Record::from_rdata(query.name().clone(), ttl, RData::MX(mx)));
                }
            }
        }
        let Ok(bytes) = response.to_vec() else { continue };
        let _ = socket.send_to(&bytes, from).await;
    }
}

/// What a timer may run late on a busy machine (CI shares two cores).
const SLACK: Duration = Duration::from_millis(500);

fn google() -> Zone {
    Zone::Mx {
        hosts: vec!["aspmx.l.google.com", "alt1.aspmx.l.google.com", "aspmx2.googlemail.com"],
        ttl: 300,
    }
}

#[tokio::test]
async fn a_hit_is_asked_once_and_kept_for_its_ttl() {
    let dns = LocalDns::start([
        ("workspace.example", google()),
        ("m365.example", Zone::Mx { hosts: vec!["m365-example.mail.protection.outlook.com"], ttl: 3600 }),
    ])
    .await;
    let mx = dns.resolver();
    assert_eq!(mx.provider_by_mx("workspace.example").await, Ok(Some(Provider::Google)));
    assert_eq!(mx.provider_by_mx("workspace.example").await, Ok(Some(Provider::Google)));
    assert_eq!(dns.queries("workspace.example"), 1, "the second answer came from the cache");
    assert_eq!(mx.provider_by_mx("m365.example").await, Ok(Some(Provider::Microsoft)));
}

#[tokio::test]
async fn a_miss_is_nobody_s_and_kept_too() {
    let dns = LocalDns::start([
        ("selfhosted.example", Zone::Mx { hosts: vec!["mail.selfhosted.example"], ttl: 300 }),
        (
            "blended.example",
            Zone::Mx { hosts: vec!["aspmx.l.google.com", "backup.blended.example"], ttl: 300 },
        ),
        ("nullmx.example", Zone::Mx { hosts: vec![""], ttl: 300 }),
        ("gone.example", Zone::NxDomain { negative_ttl: 300 }),
    ])
    .await;
    let mx = dns.resolver();
    for domain in ["selfhosted.example", "blended.example", "nullmx.example", "gone.example"] {
        assert_eq!(mx.provider_by_mx(domain).await, Ok(None), "{domain}");
        assert_eq!(mx.provider_by_mx(domain).await, Ok(None), "{domain}");
        assert_eq!(dns.queries(domain), 1, "{domain}: a miss is an answer, kept for its TTL");
    }
}

#[tokio::test]
async fn a_server_that_never_answers_costs_one_deadline_then_a_pause() {
    let dns = LocalDns::start([("silent.example", Zone::Silent), ("broken.example", Zone::ServFail)]).await;
    let mx = dns.resolver();
    let started = Instant::now();
    let first = mx.provider_by_mx("silent.example").await;
    let waited = started.elapsed();
    assert_eq!(first, Err(MxLookupError::TimedOut(QUERY_DEADLINE)));
    // The deadline is inside the gate's bound; the slack is for timers on a loaded machine.
    assert!(QUERY_DEADLINE < MX_LOOKUP_BOUND);
    assert!(waited >= QUERY_DEADLINE && waited < QUERY_DEADLINE + SLACK, "{waited:?}");
    assert!(dns.queries("silent.example") >= 1);
    // Within the pause the failure is remembered: no query, no wait.
    let asked = dns.queries("silent.example");
    let started = Instant::now();
    let again = mx.provider_by_mx("silent.example").await;
    assert!(matches!(again, Err(MxLookupError::RecentlyFailed { .. })), "{again:?}");
    assert!(started.elapsed() < QUERY_DEADLINE / 2, "{:?}: no wait", started.elapsed());
    assert_eq!(dns.queries("silent.example"), asked);
    assert!(FAILURE_PAUSE > Duration::from_secs(1));

    let servfail = mx.provider_by_mx("broken.example").await;
    assert!(matches!(servfail, Err(MxLookupError::Failed(_))), "{servfail:?}");
}

#[tokio::test]
async fn an_answer_is_asked_again_once_its_ttl_runs_out() {
    let dns =
        LocalDns::start([("moving.example", Zone::Mx { hosts: vec!["aspmx.l.google.com"], ttl: 1 })]).await;
    let mx = dns.resolver();
    assert_eq!(mx.provider_by_mx("moving.example").await, Ok(Some(Provider::Google)));
    // The domain moves to Microsoft 365; within the TTL the cached answer stands.
    dns.set("moving.example", Zone::Mx { hosts: vec!["moving-example.mail.protection.outlook.com"], ttl: 1 });
    assert_eq!(mx.provider_by_mx("moving.example").await, Ok(Some(Provider::Google)));
    assert_eq!(dns.queries("moving.example"), 1);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(mx.provider_by_mx("moving.example").await, Ok(Some(Provider::Microsoft)));
    assert_eq!(dns.queries("moving.example"), 2, "asked again after the TTL");
    // A negative answer expires the same way.
    dns.set("late.example", Zone::NxDomain { negative_ttl: 1 });
    assert_eq!(mx.provider_by_mx("late.example").await, Ok(None));
    dns.set("late.example", Zone::Mx { hosts: vec!["mx01.mail.icloud.com"], ttl: 60 });
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(mx.provider_by_mx("late.example").await, Ok(Some(Provider::Apple)));
    assert_eq!(dns.queries("late.example"), 2);
}

/// The rollup as deployed: the gate over in-memory buckets, asking the local server through the
/// resolver. A Workspace domain takes google's bucket; a silent one rides the tail and is counted.
#[tokio::test]
async fn the_gate_places_a_batch_s_domains_by_their_mx_through_the_local_server() {
    let dns = LocalDns::start([
        ("workspace.example", google()),
        ("selfhosted.example", Zone::Mx { hosts: vec!["mail.selfhosted.example"], ttl: 300 }),
        ("silent.example", Zone::Silent),
    ])
    .await;
    let limits = RateLimits::parse(
        r#"{"providers":{"google":{"per_second":1,"burst":2}},"account":{"per_second":1000,"burst":1000},"rollup":"mx"}"#,
    )
    .unwrap()
    .unwrap();
    let store = Arc::new(notice_ledger::rate::MemoryBuckets::default());
    let metrics = Arc::new(Metrics::default());
    let gate =
        BucketGate::new(store.clone(), limits).with_mx_rollup(Arc::new(dns.resolver()), metrics.clone());
    let request = |domain: &str, seed: u64| TokenRequest { domain: domain.to_owned(), shard_seed: seed };
    let batch = [
        request("gmail.com", 1),
        request("workspace.example", 2),
        request("workspace.example", 3),
        request("selfhosted.example", 4),
        request("silent.example", 5),
    ];
    let now = chrono::Utc::now();
    let started = Instant::now();
    let answers = gate.admit_batch(&batch, now).await.unwrap();
    assert!(started.elapsed() < MX_LOOKUP_BOUND + SLACK, "{:?}", started.elapsed());
    // google's burst of 2: gmail.com and one Workspace record; the other Workspace record waits
    // for google's next token — it shares gmail.com's bucket. The tail is admitted on the account.
    let limited: Vec<&str> = batch
        .iter()
        .zip(&answers)
        .filter(|(_, a)| matches!(a, Admission::Limited { .. }))
        .map(|(r, _)| r.domain.as_str())
        .collect();
    assert_eq!(limited, ["workspace.example"]);
    assert!(store.load("provider:google").await.unwrap().is_some());
    assert_eq!(store.load("selfhosted.example").await.unwrap(), None);
    assert_eq!(metrics.drain().mx_rollup_fallbacks, 1, "silent.example");
    // The next batch asks nothing: answers and the failure are remembered.
    gate.admit_batch(&batch[3..], now).await.unwrap();
    assert_eq!(dns.queries("workspace.example") + dns.queries("selfhosted.example"), 2);
    assert_eq!(dns.queries("gmail.com"), 0, "the table's domains are never looked up");
    assert_eq!(metrics.drain().mx_rollup_fallbacks, 1, "a remembered failure still rides the tail, counted");
}
