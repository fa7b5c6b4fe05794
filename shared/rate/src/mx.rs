//! The MX rollup's table: which receiving provider an MX host name belongs to, so that a domain
//! the built-in table ([`super::providers`]) does not know — a company on Google Workspace or
//! Microsoft 365 — can take its provider's bucket (`"rollup": "mx"`, [`super::rollup`]).
//!
//! A domain's name says nothing about who receives its mail; its MX hosts do. A host name under a
//! provider's own DNS name (`aspmx.l.google.com`, `acme-example.mail.protection.outlook.com`) can
//! only exist if that provider created it, so a suffix match on the host is safe to trust: a
//! domain owner can point their MX at a provider (and then their own domain is paced as that
//! provider's, which is where their mail goes), but cannot make a host name under someone else's
//! name.
//!
//! **Every** MX host must belong to the same provider, as KumoMTA's provider blocks require [1]:
//! a domain that blends providers (Google first, a self-hosted backup) is nobody's, and rides the
//! tail. A domain with no MX, or a null MX (RFC 7505, the host `.`), is nobody's too.
//!
//! Microsoft 365 (`*.mail.protection.outlook.com`, and `*.mx.microsoft` for new and DANE-enabled
//! tenants [4]) shares the `microsoft` bucket with Outlook.com (`*.olc.protection.outlook.com`)
//! here, as `NOTICE_RATE_LIMITS.domains` already lets an operator map "a company on Microsoft 365"
//! to `microsoft`. KumoMTA keeps them apart as separate edge groups [1]; one bucket for both is
//! the cautious reading — either platform sees at most the bucket's rate, never more.
//!
//! Listed: a provider's receiving hosts where a source below names them. Left out on purpose:
//! * Zoho's regional data centres (`mx.zoho.eu`, `mx.zoho.in`, `mx.zoho.com.au`, `mx.zoho.jp` [6]):
//!   separate platforms from the `zoho` provider of the built-in table, which is the main one.
//! * Microsoft's sovereign clouds (21Vianet's `partner.outlook.cn`, GCC High's `office365.us`):
//!   separate infrastructure, and no source found that names their MX pattern.
//! * The providers of the built-in table that host no other organisations' domains, or whose
//!   receiving hosts no source here names (mail.ru, naver, orange, comcast, t-online, free,
//!   libero, seznam): their own domains are in the built-in table already.
//! * Gateways (Mimecast, Proofpoint, Barracuda): they receive for many companies, but each
//!   company's mailboxes sit behind them with their own limits; no provider of ours.
//!
//! Sources (read 2026-12-02):
//! 1. KumoCorp/kumomta, `assets/policy-extras/shaping.toml` and
//!    `docs/userguide/trafficshaping/rollups.md` (commit 3ebc1e85): provider blocks by MX suffix —
//!    google (`.google.com`, `.googlemail.com`; Gmail and Google Workspace share their MX hosts),
//!    yahoo (`.yahoodns.net`, "provided by Yahoo! directly"), outlook
//!    (`.olc.protection.outlook.com`), office365 (`.mail.protection.outlook.com`), office365-dane
//!    (`.mx.microsoft`), apple (`.icloud.com`); every MX host must match (`ProviderEntry`'s
//!    `domain_matches` in `crates/kumo-api-types/src/shaping.rs`).
//! 2. KumoCorp/kumomta, `assets/community/shaping.toml` (same commit): GMX and WEB.DE
//!    (`.gmx.net`, `.web.de`), qq.com (`.qq.com`), 163.com (`.netease.com`).
//! 3. hashicorp/terraform issue 14021: Google Workspace's `aspmx.l.google.com` and
//!    `alt1`–`alt4.aspmx.l.google.com`; gmail.com's `gmail-smtp-in.l.google.com`.
//! 4. https://techcommunity.microsoft.com/t5/exchange-team-blog/implementing-inbound-smtp-dane-with-dnssec-for-exchange-online/ba-p/3939694
//!    — Exchange Online's customers' MX hosts live under `mail.protection.outlook.com`, its new
//!    DNSSEC-signed ones elsewhere; https://www.thomasjuhlolesen.dk/2026/02/microsofts-mx-change-in-july26-a-follow-up-on-my-dnssec-and-smtp-dane-articles.html
//!    — from July 2026 new accepted domains get MX hosts under `mx.microsoft`.
//! 5. https://mxrecordchecker.com/resources/protonmail-mx-records — `mail.protonmail.ch` and
//!    `mailsec.protonmail.ch` for every Proton custom domain; https://domaincheckup.net/domain/proton.me
//!    — proton.me's own MX are the same two.
//! 6. https://www.zoho.com/jp/mail/help/adminconsole/print/network-solutions-mx.html —
//!    `mx.zoho.com`, `mx2.zoho.com`, `mx3.zoho.com`; https://mxrecordchecker.com/resources/zoho-mx-records
//!    — the regional data centres' own (`mx.zoho.eu`, `mx.zoho.in`, `mx.zoho.com.au`, `mx.zoho.jp`).
//! 7. https://yandex.com.tr/support/kurum/set-mail/mx.html — Yandex's mail for domains:
//!    `mx.yandex.net`.

use super::providers::Provider;

/// Every MX host suffix with its provider: a host matches a suffix when it is the suffix or ends
/// with `.` + suffix. Lower case, no leading or trailing dot; no suffix lies under another's
/// (tests check both). An edit moves domains between buckets like an edit of the built-in table:
/// bump [`super::providers::PROVIDERS_VERSION`] with it.
pub static MX_SUFFIXES: &[(&str, Provider)] = &[
    ("google.com", Provider::Google),
    ("googlemail.com", Provider::Google),
    ("olc.protection.outlook.com", Provider::Microsoft),
    ("mail.protection.outlook.com", Provider::Microsoft),
    ("mx.microsoft", Provider::Microsoft),
    ("yahoodns.net", Provider::Yahoo),
    ("icloud.com", Provider::Apple),
    ("gmx.net", Provider::Gmx),
    ("web.de", Provider::Gmx),
    ("qq.com", Provider::Qq),
    ("netease.com", Provider::Netease),
    ("protonmail.ch", Provider::Proton),
    ("zoho.com", Provider::Zoho),
    ("yandex.net", Provider::Yandex),
];

/// The provider whose receiving platform `host` (an MX exchange name as DNS gives it: ASCII, any
/// case, an optional trailing dot) belongs to, or `None`.
pub fn provider_of_mx_host(host: &str) -> Option<Provider> {
    let host = host.strip_suffix('.').unwrap_or(host);
    MX_SUFFIXES.iter().find(|(suffix, _)| under(host, suffix)).map(|&(_, p)| p)
}

/// The provider all of a domain's MX hosts belong to, or `None`: no hosts, a null MX, a host of
/// no provider, or hosts of two providers (module doc).
pub fn provider_of_mx<'a>(hosts: impl IntoIterator<Item = &'a str>) -> Option<Provider> {
    let mut found = None;
    for host in hosts {
        let p = provider_of_mx_host(host)?;
        if found.is_some_and(|f| f != p) {
            return None;
        }
        found = Some(p);
    }
    found
}

/// Whether `host` is `suffix` or a name under it, ignoring ASCII case, without allocating.
fn under(host: &str, suffix: &str) -> bool {
    let (h, s) = (host.as_bytes(), suffix.as_bytes());
    if h.len() < s.len() || !h[h.len() - s.len()..].eq_ignore_ascii_case(s) {
        return false;
    }
    h.len() == s.len() || h[h.len() - s.len() - 1] == b'.'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_receiving_hosts_named_by_the_sources_map_to_their_provider() {
        for (host, p) in [
            ("aspmx.l.google.com", Provider::Google),
            ("alt1.aspmx.l.google.com.", Provider::Google),
            ("alt4.aspmx.l.google.com", Provider::Google),
            ("smtp.google.com", Provider::Google),
            ("gmail-smtp-in.l.google.com", Provider::Google),
            ("aspmx2.googlemail.com", Provider::Google),
            ("outlook-com.olc.protection.outlook.com", Provider::Microsoft),
            ("hotmail-com.olc.protection.outlook.com.", Provider::Microsoft),
            ("acme-example.mail.protection.outlook.com", Provider::Microsoft),
            ("acme-example.o-v1.mx.microsoft", Provider::Microsoft),
            ("mta5.am0.yahoodns.net", Provider::Yahoo),
            ("mx-aol.mail.gm0.yahoodns.net", Provider::Yahoo),
            ("mx01.mail.icloud.com", Provider::Apple),
            ("mx00.gmx.net", Provider::Gmx),
            ("mx-ha03.web.de", Provider::Gmx),
            ("mx1.qq.com", Provider::Qq),
            ("mxbiz1.qq.com", Provider::Qq),
            ("163mx01.mxmail.netease.com", Provider::Netease),
            ("mail.protonmail.ch", Provider::Proton),
            ("mailsec.protonmail.ch", Provider::Proton),
            ("mx.zoho.com", Provider::Zoho),
            ("mx3.zoho.com", Provider::Zoho),
            ("mx.yandex.net", Provider::Yandex),
            ("ASPMX.L.GOOGLE.COM.", Provider::Google),
        ] {
            assert_eq!(provider_of_mx_host(host), Some(p), "{host}");
        }
    }

    #[test]
    fn look_alikes_and_other_hosts_are_nobody_s() {
        for host in [
            "google.com.evil.example",
            "notgoogle.com",
            "evil-google.com",
            "google.co",
            "mail.example.com",
            "protection.outlook.com",
            "outlook.com",
            "mx.zoho.eu",
            "mx.zoho.com.au",
            "inbound.mimecast.com",
            "",
            ".",
            "com",
            "xgoogle.com",
        ] {
            assert_eq!(provider_of_mx_host(host), None, "{host:?}");
        }
    }

    #[test]
    fn every_host_must_belong_to_the_same_provider() {
        let google = ["aspmx.l.google.com", "alt1.aspmx.l.google.com", "aspmx2.googlemail.com"];
        assert_eq!(provider_of_mx(google), Some(Provider::Google));
        // A self-hosted backup, or a second provider: nobody's.
        assert_eq!(provider_of_mx(["aspmx.l.google.com", "backup.acme.example"]), None);
        assert_eq!(provider_of_mx(["aspmx.l.google.com", "acme.mail.protection.outlook.com"]), None);
        // No MX, and the null MX (RFC 7505): nobody's.
        assert_eq!(provider_of_mx([]), None);
        assert_eq!(provider_of_mx(["."]), None);
        assert_eq!(provider_of_mx(["", "aspmx.l.google.com"]), None);
        // Microsoft 365 and Outlook.com share the microsoft bucket.
        let m365 = ["acme.mail.protection.outlook.com", "acme.o-v1.mx.microsoft"];
        assert_eq!(provider_of_mx(m365), Some(Provider::Microsoft));
    }

    #[test]
    fn suffixes_are_canonical_unique_and_never_nested() {
        for (i, &(suffix, p)) in MX_SUFFIXES.iter().enumerate() {
            let canonical = suffix
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-');
            assert!(canonical && !suffix.starts_with('.') && !suffix.ends_with('.'), "{suffix}");
            assert!(suffix.contains('.'), "{suffix}: a bare TLD is nobody's receiving platform");
            assert_eq!(provider_of_mx_host(suffix), Some(p), "{suffix}");
            for &(other, _) in &MX_SUFFIXES[i + 1..] {
                assert!(!under(suffix, other) && !under(other, suffix), "{suffix} and {other} overlap");
            }
        }
    }
}
