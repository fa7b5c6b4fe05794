//! The built-in table of receiving mail providers: which recipient domains one provider's mail
//! platform receives, so that a rate bucket can be keyed by the provider instead of by the domain.
//!
//! Receiving systems throttle a sender per platform, not per domain name: mail to `hotmail.com`,
//! `outlook.fr` and `live.co.uk` reaches the same Outlook.com edge and counts against one budget,
//! and MTAs shape by it (KumoMTA groups destinations into a "site" by their MX hosts, Postfix by
//! transport). This module is only the pure lookup by domain name; [`super::limits`] keys buckets
//! by it, and [`super::mx`] finds the same providers by MX host for the optional MX rollup.
//!
//! What is listed: the consumer domains of the largest mailbox providers, each domain only where a
//! source below backs it or it is evidently the provider's own sign-up domain. Left out on purpose:
//! * `yahoo.co.jp` and other Yahoo Japan domains: licensed to a different company, hosted apart
//!   from Yahoo Inc.'s mail (Spam Resource [5]).
//! * `att.net`, `sbcglobal.net`, `bellsouth.net`: Yahoo filters them, but the receiving MTA is in
//!   AT&T's network (Validity [8]), so AT&T's gateway, not Yahoo's, is what throttles a sender; the
//!   sources disagree on whether that has changed since 2025 (Suped [9]).
//! * `mail.com` and its many vanity domains: United Internet like GMX, but behind its own MX hosts
//!   with its own shaping rule (KumoMTA [3]).
//! * Country variants no source shows in use or under the provider's MX (`hotmail.ru`, `live.ru`,
//!   `yahoo.ru`, `yahoo.co.kr`, `yahoo.cn`, …): a look-alike registered by someone else would put
//!   a stranger's domain in a provider's bucket.
//!
//! Sources (read 2026-12-02):
//! 1. validatorjs/validator.js, `src/lib/normalizeEmail.js` (commit 22495e5e): the Outlook.com
//!    (hotmail.*, live.*, outlook.*, msn.com, passport.com), Yahoo, Yandex and iCloud domain
//!    lists, citing Microsoft's 2013 announcement of the international Outlook.com domains.
//! 2. jgillich/free-email-domains, `free-email-domains.txt` (free domains with a valid MX) and
//!    `hubspot-free-email-domains.txt` (commit a2919f0f): the further hotmail.*, live.*, outlook.*
//!    and yahoo.* country domains, windowslive.com, aim.com, gmx.*, web.de, mail.ru, inbox.ru,
//!    list.ru, bk.ru, ya.ru, qq.com, foxmail.com, 163.com, 126.com, yeah.net, naver.com,
//!    orange.fr, wanadoo.fr, comcast.net, zoho.com, t-online.de, free.fr, libero.it, seznam.cz,
//!    email.cz, post.cz, verizon.net.
//! 3. KumoCorp/kumomta, `assets/policy-extras/shaping.toml`: provider blocks by MX suffix —
//!    google (`.google.com`, `.googlemail.com`), yahoo (`.yahoodns.net`), outlook
//!    (`.olc.protection.outlook.com`), apple (`.icloud.com`) — and own blocks for comcast.net,
//!    orange.fr and mail.com.
//! 4. https://docs.kumomta.com/userguide/configuration/rollup — hotmail.com and outlook.com are
//!    "owned and operated by the same entity and infrastructure".
//! 5. https://www.spamresource.com/2021/09/reference-magy-microsoft-aol-gmail.html — Yahoo does
//!    not own Yahoo Japan.
//! 6. https://help.returnpath.com/hc/en-us/articles/360028141052 — AOL and Yahoo merged their
//!    mail infrastructure in 2019 and share one spam filtering system.
//! 7. https://wordtothewise.com/2017/06/final-migration-verizon-email-addresses-aol — verizon.net's
//!    MX moved to AOL on 2017-06-20.
//! 8. https://knowledge.validity.com/hc/en-us/articles/115002814627 — AT&T, Bellsouth and SBC: the
//!    receiving MTA is in AT&T's network, filtering is Yahoo's.
//! 9. https://www.suped.com/learn/email-deliverability/how-are-email-delivery-issues-between-att-and-yahoo-related
//! 10. https://proton.me/support/addresses-and-aliases — proton.me, protonmail.com, protonmail.ch,
//!     pm.me.
//! 11. andybod1-lang/eurocheck, `research/email-companies.md`: GMX and WEB.DE (United Internet),
//!     Mail.ru's domains, zohomail.com.
//! 12. https://www.ii.com/outlook-com-aliases/ — Outlook.com aliases on outlook.com, hotmail.com,
//!     msn.com, windowslive.com, live.com, live.<tld> and outlook.<tld>.

use std::fmt;

/// The version of the built-in table. It is versioned because an edit moves domains between
/// buckets: a domain added to a provider leaves its own bucket (and its configured limit) for the
/// provider's, so operators must be able to tell which table a sender ran with. Bump it (to the
/// date of the change) with every edit to [`TABLE`].
pub const PROVIDERS_VERSION: &str = "2026-12-02";

/// A receiving mail provider: one mail platform that receives, and throttles, for all its domains.
///
/// An enum rather than a `&'static str` newtype: the set is closed and compiled in, so a typo in
/// code is a compile error, `match` is exhaustive when a provider is added, the value is one byte
/// and `Copy`, and [`Provider::name`] is the single place a configuration name is spelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Provider {
    /// Gmail.
    Google,
    /// Outlook.com (formerly Hotmail, Windows Live, MSN) — consumer mail; the table lists no
    /// Microsoft 365 domain, but a mapping or the MX rollup may put one in this bucket.
    Microsoft,
    /// Yahoo Mail and AOL Mail (one platform since 2019), with verizon.net (on AOL since 2017).
    Yahoo,
    /// iCloud Mail.
    Apple,
    /// GMX and WEB.DE (United Internet).
    Gmx,
    /// Mail.ru (VK).
    MailRu,
    /// Yandex Mail.
    Yandex,
    /// QQ Mail and Foxmail (Tencent).
    Qq,
    /// NetEase Mail.
    Netease,
    /// Naver Mail.
    Naver,
    /// Orange (and its former brand Wanadoo), France.
    Orange,
    /// Comcast Xfinity.
    Comcast,
    /// Proton Mail.
    Proton,
    /// Zoho Mail (its main data centre; the regional ones have their own MX).
    Zoho,
    /// Deutsche Telekom's T-Online.
    TOnline,
    /// Free, France.
    Free,
    /// Libero Mail (Italiaonline).
    Libero,
    /// Seznam.cz.
    Seznam,
}

impl Provider {
    /// Every provider, in declaration order (for listings and configuration checks).
    pub const ALL: [Provider; 18] = [
        Provider::Google,
        Provider::Microsoft,
        Provider::Yahoo,
        Provider::Apple,
        Provider::Gmx,
        Provider::MailRu,
        Provider::Yandex,
        Provider::Qq,
        Provider::Netease,
        Provider::Naver,
        Provider::Orange,
        Provider::Comcast,
        Provider::Proton,
        Provider::Zoho,
        Provider::TOnline,
        Provider::Free,
        Provider::Libero,
        Provider::Seznam,
    ];

    /// The stable lower-case name used in configuration and metrics. Never rename one: a
    /// configured limit would silently stop applying.
    pub fn name(self) -> &'static str {
        match self {
            Provider::Google => "google",
            Provider::Microsoft => "microsoft",
            Provider::Yahoo => "yahoo",
            Provider::Apple => "apple",
            Provider::Gmx => "gmx",
            Provider::MailRu => "mailru",
            Provider::Yandex => "yandex",
            Provider::Qq => "qq",
            Provider::Netease => "netease",
            Provider::Naver => "naver",
            Provider::Orange => "orange",
            Provider::Comcast => "comcast",
            Provider::Proton => "proton",
            Provider::Zoho => "zoho",
            Provider::TOnline => "t-online",
            Provider::Free => "free",
            Provider::Libero => "libero",
            Provider::Seznam => "seznam",
        }
    }

    /// The provider a configuration name stands for: exactly one of the [`Provider::name`]s.
    /// No case folding or trimming: a name is an identifier with one spelling, and a near miss
    /// should be reported by the caller, not guessed.
    pub fn parse(name: &str) -> Option<Provider> {
        Provider::ALL.into_iter().find(|p| p.name() == name)
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Every recipient domain with its provider: lower-case A-labels, sorted by bytes so that
/// [`provider_of`] can binary-search it (a test checks the order and that no domain repeats).
/// Any edit bumps [`PROVIDERS_VERSION`].
static TABLE: &[(&str, Provider)] = &[
    ("126.com", Provider::Netease),
    ("163.com", Provider::Netease),
    ("aim.com", Provider::Yahoo),
    ("aol.com", Provider::Yahoo),
    ("bk.ru", Provider::MailRu),
    ("comcast.net", Provider::Comcast),
    ("email.cz", Provider::Seznam),
    ("foxmail.com", Provider::Qq),
    ("free.fr", Provider::Free),
    ("gmail.com", Provider::Google),
    ("gmx.at", Provider::Gmx),
    ("gmx.ch", Provider::Gmx),
    ("gmx.com", Provider::Gmx),
    ("gmx.de", Provider::Gmx),
    ("gmx.fr", Provider::Gmx),
    ("gmx.net", Provider::Gmx),
    ("gmx.us", Provider::Gmx),
    ("googlemail.com", Provider::Google),
    ("hotmail.at", Provider::Microsoft),
    ("hotmail.be", Provider::Microsoft),
    ("hotmail.ca", Provider::Microsoft),
    ("hotmail.ch", Provider::Microsoft),
    ("hotmail.cl", Provider::Microsoft),
    ("hotmail.co.il", Provider::Microsoft),
    ("hotmail.co.jp", Provider::Microsoft),
    ("hotmail.co.nz", Provider::Microsoft),
    ("hotmail.co.th", Provider::Microsoft),
    ("hotmail.co.uk", Provider::Microsoft),
    ("hotmail.co.za", Provider::Microsoft),
    ("hotmail.com", Provider::Microsoft),
    ("hotmail.com.ar", Provider::Microsoft),
    ("hotmail.com.au", Provider::Microsoft),
    ("hotmail.com.br", Provider::Microsoft),
    ("hotmail.com.gr", Provider::Microsoft),
    ("hotmail.com.mx", Provider::Microsoft),
    ("hotmail.com.pe", Provider::Microsoft),
    ("hotmail.com.tr", Provider::Microsoft),
    ("hotmail.com.vn", Provider::Microsoft),
    ("hotmail.cz", Provider::Microsoft),
    ("hotmail.de", Provider::Microsoft),
    ("hotmail.dk", Provider::Microsoft),
    ("hotmail.es", Provider::Microsoft),
    ("hotmail.fi", Provider::Microsoft),
    ("hotmail.fr", Provider::Microsoft),
    ("hotmail.hu", Provider::Microsoft),
    ("hotmail.id", Provider::Microsoft),
    ("hotmail.ie", Provider::Microsoft),
    ("hotmail.in", Provider::Microsoft),
    ("hotmail.it", Provider::Microsoft),
    ("hotmail.jp", Provider::Microsoft),
    ("hotmail.kr", Provider::Microsoft),
    ("hotmail.lv", Provider::Microsoft),
    ("hotmail.my", Provider::Microsoft),
    ("hotmail.nl", Provider::Microsoft),
    ("hotmail.ph", Provider::Microsoft),
    ("hotmail.pt", Provider::Microsoft),
    ("hotmail.sa", Provider::Microsoft),
    ("hotmail.sg", Provider::Microsoft),
    ("hotmail.sk", Provider::Microsoft),
    ("icloud.com", Provider::Apple),
    ("inbox.ru", Provider::MailRu),
    ("libero.it", Provider::Libero),
    ("list.ru", Provider::MailRu),
    ("live.at", Provider::Microsoft),
    ("live.be", Provider::Microsoft),
    ("live.ca", Provider::Microsoft),
    ("live.cl", Provider::Microsoft),
    ("live.co.uk", Provider::Microsoft),
    ("live.co.za", Provider::Microsoft),
    ("live.com", Provider::Microsoft),
    ("live.com.ar", Provider::Microsoft),
    ("live.com.au", Provider::Microsoft),
    ("live.com.mx", Provider::Microsoft),
    ("live.com.pt", Provider::Microsoft),
    ("live.com.sg", Provider::Microsoft),
    ("live.de", Provider::Microsoft),
    ("live.dk", Provider::Microsoft),
    ("live.es", Provider::Microsoft),
    ("live.eu", Provider::Microsoft),
    ("live.fr", Provider::Microsoft),
    ("live.ie", Provider::Microsoft),
    ("live.in", Provider::Microsoft),
    ("live.it", Provider::Microsoft),
    ("live.jp", Provider::Microsoft),
    ("live.nl", Provider::Microsoft),
    ("live.no", Provider::Microsoft),
    ("live.se", Provider::Microsoft),
    ("mac.com", Provider::Apple),
    ("mail.ru", Provider::MailRu),
    ("me.com", Provider::Apple),
    ("msn.com", Provider::Microsoft),
    ("naver.com", Provider::Naver),
    ("orange.fr", Provider::Orange),
    ("outlook.at", Provider::Microsoft),
    ("outlook.be", Provider::Microsoft),
    ("outlook.cl", Provider::Microsoft),
    ("outlook.co.id", Provider::Microsoft),
    ("outlook.co.il", Provider::Microsoft),
    ("outlook.co.nz", Provider::Microsoft),
    ("outlook.co.th", Provider::Microsoft),
    ("outlook.com", Provider::Microsoft),
    ("outlook.com.ar", Provider::Microsoft),
    ("outlook.com.au", Provider::Microsoft),
    ("outlook.com.br", Provider::Microsoft),
    ("outlook.com.gr", Provider::Microsoft),
    ("outlook.com.pe", Provider::Microsoft),
    ("outlook.com.tr", Provider::Microsoft),
    ("outlook.com.vn", Provider::Microsoft),
    ("outlook.cz", Provider::Microsoft),
    ("outlook.de", Provider::Microsoft),
    ("outlook.dk", Provider::Microsoft),
    ("outlook.es", Provider::Microsoft),
    ("outlook.fr", Provider::Microsoft),
    ("outlook.hu", Provider::Microsoft),
    ("outlook.id", Provider::Microsoft),
    ("outlook.ie", Provider::Microsoft),
    ("outlook.in", Provider::Microsoft),
    ("outlook.it", Provider::Microsoft),
    ("outlook.jp", Provider::Microsoft),
    ("outlook.kr", Provider::Microsoft),
    ("outlook.lv", Provider::Microsoft),
    ("outlook.my", Provider::Microsoft),
    ("outlook.nl", Provider::Microsoft),
    ("outlook.ph", Provider::Microsoft),
    ("outlook.pt", Provider::Microsoft),
    ("outlook.sa", Provider::Microsoft),
    ("outlook.sg", Provider::Microsoft),
    ("outlook.sk", Provider::Microsoft),
    ("passport.com", Provider::Microsoft),
    ("pm.me", Provider::Proton),
    ("post.cz", Provider::Seznam),
    ("proton.me", Provider::Proton),
    ("protonmail.ch", Provider::Proton),
    ("protonmail.com", Provider::Proton),
    ("qq.com", Provider::Qq),
    ("rocketmail.com", Provider::Yahoo),
    ("seznam.cz", Provider::Seznam),
    ("t-online.de", Provider::TOnline),
    ("verizon.net", Provider::Yahoo),
    ("wanadoo.fr", Provider::Orange),
    ("web.de", Provider::Gmx),
    ("windowslive.com", Provider::Microsoft),
    ("ya.ru", Provider::Yandex),
    ("yahoo.ca", Provider::Yahoo),
    ("yahoo.co.id", Provider::Yahoo),
    ("yahoo.co.in", Provider::Yahoo),
    ("yahoo.co.nz", Provider::Yahoo),
    ("yahoo.co.uk", Provider::Yahoo),
    ("yahoo.com", Provider::Yahoo),
    ("yahoo.com.ar", Provider::Yahoo),
    ("yahoo.com.au", Provider::Yahoo),
    ("yahoo.com.br", Provider::Yahoo),
    ("yahoo.com.hk", Provider::Yahoo),
    ("yahoo.com.mx", Provider::Yahoo),
    ("yahoo.com.my", Provider::Yahoo),
    ("yahoo.com.ph", Provider::Yahoo),
    ("yahoo.com.sg", Provider::Yahoo),
    ("yahoo.com.tw", Provider::Yahoo),
    ("yahoo.com.vn", Provider::Yahoo),
    ("yahoo.de", Provider::Yahoo),
    ("yahoo.dk", Provider::Yahoo),
    ("yahoo.es", Provider::Yahoo),
    ("yahoo.fr", Provider::Yahoo),
    ("yahoo.gr", Provider::Yahoo),
    ("yahoo.ie", Provider::Yahoo),
    ("yahoo.in", Provider::Yahoo),
    ("yahoo.it", Provider::Yahoo),
    ("yahoo.se", Provider::Yahoo),
    ("yandex.by", Provider::Yandex),
    ("yandex.com", Provider::Yandex),
    ("yandex.kz", Provider::Yandex),
    ("yandex.ru", Provider::Yandex),
    ("yandex.ua", Provider::Yandex),
    ("yeah.net", Provider::Netease),
    ("ymail.com", Provider::Yahoo),
    ("zoho.com", Provider::Zoho),
    ("zohomail.com", Provider::Zoho),
];

/// Length of the longest domain in [`TABLE`] (a test checks it): a longer input cannot match, and
/// a shorter one is lower-cased in a stack buffer of this size, so the ASCII path never allocates.
const MAX_DOMAIN_LEN: usize = 15;

/// The provider that receives mail for `domain`, or `None` for any other domain.
///
/// Case-insensitive, one trailing dot ignored; IDN U-labels are mapped to A-labels (UTS 46, as
/// addresses are stored) before the lookup, and punycode matches as is. Exact domains only: a
/// subdomain such as `mail.gmail.com` is `None`, because recipient domains are what SES delivers
/// to, and a subdomain is a name its owner can point at any MX — a company's `mail.example.com`
/// under a provider's name is not that provider's consumer platform.
///
/// Called per notice: ASCII input is lower-cased in a stack buffer and binary-searched, with no
/// allocation; only non-ASCII input allocates, for its IDNA conversion.
pub fn provider_of(domain: &str) -> Option<Provider> {
    let domain = domain.strip_suffix('.').unwrap_or(domain);
    if domain.is_ascii() {
        if domain.len() > MAX_DOMAIN_LEN {
            return None;
        }
        let mut buf = [0u8; MAX_DOMAIN_LEN];
        let key = &mut buf[..domain.len()];
        key.copy_from_slice(domain.as_bytes());
        key.make_ascii_lowercase();
        return lookup(key);
    }
    // Lenient UTS 46 (no STD3 or DNS-length checks): it maps exactly like the strict form the
    // addresses are stored in, and a lookup has nothing to reject.
    let ascii = idna::domain_to_ascii(domain).ok()?;
    // A U-label input may end in a full stop other than '.' (U+3002, U+FF0E), mapped to '.'.
    lookup(ascii.strip_suffix('.').unwrap_or(&ascii).as_bytes())
}

/// Binary search of [`TABLE`] for a lower-case A-label domain.
fn lookup(key: &[u8]) -> Option<Provider> {
    TABLE.binary_search_by(|(d, _)| d.as_bytes().cmp(key)).ok().map(|i| TABLE[i].1)
}

/// The domains of `p`, in table order (for operators: `noticectl limits` lists them).
pub fn domains_of(p: Provider) -> impl Iterator<Item = &'static str> {
    TABLE.iter().filter(move |(_, q)| *q == p).map(|(d, _)| *d)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// The table written out a second time, by provider, by hand: adding, removing or moving a
    /// domain must be done in both places (and [`PROVIDERS_VERSION`] bumped), never by accident.
    const EXPECTED: &[(Provider, &str)] = &[
        (Provider::Google, "gmail.com googlemail.com"),
        (
            Provider::Microsoft,
            "hotmail.at hotmail.be hotmail.ca hotmail.ch hotmail.cl hotmail.co.il hotmail.co.jp \
             hotmail.co.nz hotmail.co.th hotmail.co.uk hotmail.co.za hotmail.com hotmail.com.ar \
             hotmail.com.au hotmail.com.br hotmail.com.gr hotmail.com.mx hotmail.com.pe hotmail.com.tr \
             hotmail.com.vn hotmail.cz hotmail.de hotmail.dk hotmail.es hotmail.fi hotmail.fr \
             hotmail.hu hotmail.id hotmail.ie hotmail.in hotmail.it hotmail.jp hotmail.kr hotmail.lv \
             hotmail.my hotmail.nl hotmail.ph hotmail.pt hotmail.sa hotmail.sg hotmail.sk live.at \
             live.be live.ca live.cl live.co.uk live.co.za live.com live.com.ar live.com.au live.com.mx \
             live.com.pt live.com.sg live.de live.dk live.es live.eu live.fr live.ie live.in live.it \
             live.jp live.nl live.no live.se msn.com passport.com windowslive.com outlook.at outlook.be \
             outlook.cl outlook.co.id outlook.co.il outlook.co.nz outlook.co.th outlook.com \
             outlook.com.ar outlook.com.au outlook.com.br outlook.com.gr outlook.com.pe outlook.com.tr \
             outlook.com.vn outlook.cz outlook.de outlook.dk outlook.es outlook.fr outlook.hu \
             outlook.id outlook.ie outlook.in outlook.it outlook.jp outlook.kr outlook.lv outlook.my \
             outlook.nl outlook.ph outlook.pt outlook.sa outlook.sg outlook.sk",
        ),
        (
            Provider::Yahoo,
            "yahoo.com yahoo.ca yahoo.co.id yahoo.co.in yahoo.co.nz yahoo.co.uk yahoo.com.ar \
             yahoo.com.au yahoo.com.br yahoo.com.hk yahoo.com.mx yahoo.com.my yahoo.com.ph yahoo.com.sg \
             yahoo.com.tw yahoo.com.vn yahoo.de yahoo.dk yahoo.es yahoo.fr yahoo.gr yahoo.ie yahoo.in \
             yahoo.it yahoo.se ymail.com rocketmail.com aol.com aim.com verizon.net",
        ),
        (Provider::Apple, "icloud.com me.com mac.com"),
        (Provider::Gmx, "gmx.at gmx.ch gmx.com gmx.de gmx.fr gmx.net gmx.us web.de"),
        (Provider::MailRu, "mail.ru inbox.ru list.ru bk.ru"),
        (Provider::Yandex, "yandex.ru yandex.com yandex.by yandex.kz yandex.ua ya.ru"),
        (Provider::Qq, "qq.com foxmail.com"),
        (Provider::Netease, "163.com 126.com yeah.net"),
        (Provider::Naver, "naver.com"),
        (Provider::Orange, "orange.fr wanadoo.fr"),
        (Provider::Comcast, "comcast.net"),
        (Provider::Proton, "proton.me protonmail.com protonmail.ch pm.me"),
        (Provider::Zoho, "zoho.com zohomail.com"),
        (Provider::TOnline, "t-online.de"),
        (Provider::Free, "free.fr"),
        (Provider::Libero, "libero.it"),
        (Provider::Seznam, "seznam.cz email.cz post.cz"),
    ];

    #[test]
    fn every_table_domain_maps_to_its_provider() {
        for &(domain, p) in TABLE {
            assert_eq!(provider_of(domain), Some(p), "{domain}");
            assert!(domains_of(p).any(|d| d == domain), "{domain} not in domains_of({p})");
        }
    }

    #[test]
    fn table_is_exactly_the_hand_written_list() {
        let table: BTreeSet<(&str, Provider)> = TABLE.iter().copied().collect();
        let mut expected = BTreeSet::new();
        for &(p, domains) in EXPECTED {
            for domain in domains.split_whitespace() {
                assert!(expected.insert((domain, p)), "{domain} listed twice");
                assert_eq!(provider_of(domain), Some(p), "{domain}");
            }
        }
        let missing: Vec<_> = expected.difference(&table).collect();
        let extra: Vec<_> = table.difference(&expected).collect();
        assert!(missing.is_empty() && extra.is_empty(), "missing {missing:?}, unexpected {extra:?}");
    }

    #[test]
    fn the_domains_named_in_the_issue_are_listed() {
        let named = [
            ("gmail.com", Provider::Google),
            ("googlemail.com", Provider::Google),
            ("outlook.com", Provider::Microsoft),
            ("hotmail.com", Provider::Microsoft),
            ("hotmail.co.uk", Provider::Microsoft),
            ("hotmail.fr", Provider::Microsoft),
            ("hotmail.de", Provider::Microsoft),
            ("hotmail.it", Provider::Microsoft),
            ("hotmail.es", Provider::Microsoft),
            ("live.com", Provider::Microsoft),
            ("live.co.uk", Provider::Microsoft),
            ("msn.com", Provider::Microsoft),
            ("passport.com", Provider::Microsoft),
            ("windowslive.com", Provider::Microsoft),
            ("yahoo.com", Provider::Yahoo),
            ("yahoo.co.uk", Provider::Yahoo),
            ("yahoo.fr", Provider::Yahoo),
            ("yahoo.de", Provider::Yahoo),
            ("ymail.com", Provider::Yahoo),
            ("rocketmail.com", Provider::Yahoo),
            ("aol.com", Provider::Yahoo),
            ("aim.com", Provider::Yahoo),
            ("verizon.net", Provider::Yahoo),
            ("icloud.com", Provider::Apple),
            ("me.com", Provider::Apple),
            ("mac.com", Provider::Apple),
            ("gmx.de", Provider::Gmx),
            ("gmx.net", Provider::Gmx),
            ("gmx.at", Provider::Gmx),
            ("gmx.ch", Provider::Gmx),
            ("gmx.com", Provider::Gmx),
            ("web.de", Provider::Gmx),
            ("mail.ru", Provider::MailRu),
            ("inbox.ru", Provider::MailRu),
            ("list.ru", Provider::MailRu),
            ("bk.ru", Provider::MailRu),
            ("yandex.ru", Provider::Yandex),
            ("yandex.com", Provider::Yandex),
            ("ya.ru", Provider::Yandex),
            ("yandex.by", Provider::Yandex),
            ("yandex.kz", Provider::Yandex),
            ("yandex.ua", Provider::Yandex),
            ("qq.com", Provider::Qq),
            ("foxmail.com", Provider::Qq),
            ("163.com", Provider::Netease),
            ("126.com", Provider::Netease),
            ("yeah.net", Provider::Netease),
            ("naver.com", Provider::Naver),
            ("orange.fr", Provider::Orange),
            ("wanadoo.fr", Provider::Orange),
            ("comcast.net", Provider::Comcast),
            ("protonmail.com", Provider::Proton),
            ("proton.me", Provider::Proton),
            ("pm.me", Provider::Proton),
            ("zoho.com", Provider::Zoho),
            ("t-online.de", Provider::TOnline),
            ("free.fr", Provider::Free),
            ("libero.it", Provider::Libero),
            ("seznam.cz", Provider::Seznam),
        ];
        for (domain, p) in named {
            assert_eq!(provider_of(domain), Some(p), "{domain}");
        }
    }

    #[test]
    fn case_and_trailing_dot_are_ignored() {
        assert_eq!(provider_of("GMAIL.COM"), Some(Provider::Google));
        assert_eq!(provider_of("Gmail.Com."), Some(Provider::Google));
        assert_eq!(provider_of("HotMail.Co.UK"), Some(Provider::Microsoft));
        assert_eq!(provider_of("yahoo.com."), Some(Provider::Yahoo));
        assert_eq!(provider_of("T-Online.DE."), Some(Provider::TOnline));
        // One trailing dot is the root; two are not a domain.
        assert_eq!(provider_of("gmail.com.."), None);
        assert_eq!(provider_of(""), None);
        assert_eq!(provider_of("."), None);
    }

    #[test]
    fn idn_u_labels_and_punycode_are_normalised() {
        // UTS 46 maps full-width letters and the ideographic and full-width full stops.
        assert_eq!(provider_of("ｇｍａｉｌ．ｃｏｍ"), Some(Provider::Google));
        assert_eq!(provider_of("gmail。com"), Some(Provider::Google));
        assert_eq!(provider_of("Ｙａｈｏｏ.com。"), Some(Provider::Yahoo));
        // A U-label and its punycode are one domain (neither is a provider's).
        assert_eq!(provider_of("bücher.example"), None);
        assert_eq!(provider_of("xn--bcher-kva.example"), None);
        assert_eq!(provider_of("XN--BCHER-KVA.EXAMPLE."), None);
        // Look-alikes in other scripts stay look-alikes: Cyrillic а (U+0430) in "gmаil".
        assert_eq!(provider_of("gm\u{430}il.com"), None);
        // Input IDNA rejects is simply not a provider's.
        assert_eq!(provider_of("gmail.com\u{200b}\u{0}"), None);
        assert_eq!(provider_of("xn--ü.com"), None);
    }

    #[test]
    fn subdomains_and_look_alikes_are_not_providers() {
        for domain in [
            "mail.gmail.com",
            "smtp.outlook.com",
            "gmail.com.evil.example",
            "notgmail.com",
            "gmail.co",
            "gmail",
            "com",
            "gmailcom",
            "gmail.com ",
            " gmail.com",
            "gmail-com",
            "yahoo.co.jp",
            "att.net",
            "hotmail.ru",
            "mail.com",
            "example.com",
            "a-very-long-domain-name-beyond-any-in-the-table.example",
        ] {
            assert_eq!(provider_of(domain), None, "{domain}");
        }
    }

    #[test]
    fn table_is_sorted_unique_lower_case_and_fits_the_buffer() {
        for pair in TABLE.windows(2) {
            assert!(pair[0].0 < pair[1].0, "{} must sort before {}", pair[0].0, pair[1].0);
        }
        for &(domain, _) in TABLE {
            let canonical = domain
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-');
            assert!(canonical && !domain.ends_with('.') && domain.contains('.'), "{domain}");
        }
        let longest = TABLE.iter().map(|(d, _)| d.len()).max();
        assert_eq!(longest, Some(MAX_DOMAIN_LEN));
    }

    #[test]
    fn names_round_trip_and_every_provider_has_domains() {
        let mut names = BTreeSet::new();
        for p in Provider::ALL {
            assert_eq!(Provider::parse(p.name()), Some(p));
            assert_eq!(p.to_string(), p.name());
            assert!(names.insert(p.name()), "{p} named twice");
            assert!(p.name().bytes().all(|b| b.is_ascii_lowercase() || b == b'-'), "{p}");
            assert!(domains_of(p).next().is_some(), "{p} has no domain");
        }
        // Every provider in the table is in ALL (so ALL misses no variant that has domains).
        assert!(TABLE.iter().all(|(_, p)| Provider::ALL.contains(p)));
        assert_eq!(Provider::parse("Google"), None);
        assert_eq!(Provider::parse(" google"), None);
        assert_eq!(Provider::parse("gmail.com"), None);
        assert_eq!(Provider::parse(""), None);
    }

    #[test]
    fn domains_of_lists_each_provider_s_domains() {
        let apple: Vec<_> = domains_of(Provider::Apple).collect();
        assert_eq!(apple, ["icloud.com", "mac.com", "me.com"]);
        let total: usize = Provider::ALL.iter().map(|&p| domains_of(p).count()).sum();
        assert_eq!(total, TABLE.len());
    }

    #[test]
    fn version_is_a_date() {
        let b = PROVIDERS_VERSION.as_bytes();
        let shape = b.len() == 10
            && b[4] == b'-'
            && b[7] == b'-'
            && b.iter().enumerate().all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit());
        assert!(shape, "{PROVIDERS_VERSION}");
    }
}
