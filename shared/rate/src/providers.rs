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
mod tests;
