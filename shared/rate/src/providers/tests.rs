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
        let canonical =
            domain.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-');
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
