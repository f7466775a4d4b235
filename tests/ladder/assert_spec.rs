//! probes/*.toml: the builtin specs parse, and bad specs are refused naming the key.

use netprobe::assert::{Bound, Check, NetStateCheck, ProbeSpec, SpecError};
use netprobe::evidence::result::RungName;

#[test]
fn all_builtin_specs_parse_with_the_expected_ids() {
    let _baton = crate::common::baton(module_path!());
    let ids = |r| -> Vec<(String, String)> {
        ProbeSpec::builtin(r)
            .unwrap_or_else(|e| panic!("{r}: {e}"))
            .assertions
            .into_iter()
            .map(|a| (a.id, a.role))
            .collect()
    };
    let has = |r, id: &str, role: &str| {
        assert!(
            ids(r).contains(&(id.to_string(), role.to_string())),
            "{r} lacks {id} ({role})"
        )
    };
    for r in RungName::ALL {
        let spec = ProbeSpec::builtin(r).unwrap();
        assert_eq!(spec.rung, r);
        assert!(!spec.question.is_empty());
    }
    has(RungName::Kernel, "lo-type-772", "pass");
    has(RungName::Kernel, "lo-down-in-fresh-netns", "pass");
    has(RungName::Kernel, "lo-up-after-bring-up", "pass");
    has(RungName::Criu, "link-dumped-after-netns", "pass");
    has(RungName::Criu, "state-preserved", "pass");
    has(RungName::Oci, "state-preserved", "pass");
    has(RungName::Oci, "no-netns-image", "empty-ns");
    has(RungName::Oci, "restore-no-netns-image", "empty-ns");
    has(RungName::Oci, "no-link-dumped-after-netns", "empty-ns");
    has(RungName::Oci, "lo-down-after-restore", "empty-ns");
    has(RungName::ExternalNetns, "netns-image-key-only", "pass");
    has(RungName::ExternalNetns, "state-preserved", "pass");

    let ext = ProbeSpec::builtin(RungName::ExternalNetns).unwrap();
    let img = ext
        .assertions
        .iter()
        .find(|a| a.id == "netns-image-key-only")
        .unwrap();
    assert_eq!(
        img.check,
        Check::Files {
            glob: "images/netns-*.img".into(),
            count: Bound {
                eq: Some(1),
                min: None,
                max: None
            },
            bytes: Some(Bound {
                eq: None,
                min: None,
                max: Some(64)
            }),
        }
    );
    let kernel = ProbeSpec::builtin(RungName::Kernel).unwrap();
    assert!(kernel.assertions.iter().any(|a| a.check
        == Check::NetState {
            file: "netstate-before.json".into(),
            check: NetStateCheck::LoUp127 { expect: false }
        }));
}

const HEAD: &str = "rung = \"criu\"\nquestion = \"q\"\n";

fn parse(body: &str) -> Result<ProbeSpec, SpecError> {
    ProbeSpec::from_toml("probes/test.toml", &format!("{HEAD}{body}"))
}

fn err(body: &str) -> String {
    parse(body).expect_err("spec accepted").to_string()
}

const GOOD: &str = "[[assertion]]\nid = \"a\"\nrole = \"pass\"\ndescription = \"d\"\nkind = \"log\"\nlog = \"dump.log\"\npattern = \"LD\"\ncount = { min = 1 }\n";

#[test]
fn a_minimal_spec_parses() {
    let _baton = crate::common::baton(module_path!());
    let s = parse(GOOD).unwrap();
    assert_eq!(s.assertions.len(), 1);
}

#[test]
fn bad_specs_name_the_file_and_key() {
    let _baton = crate::common::baton(module_path!());
    let cases: &[(&str, &str)] = &[
        (&GOOD.replace("kind = \"log\"", "kind = \"grep\""), "`kind`"),
        (
            &GOOD.replace("count = { min = 1 }", "count = { least = 1 }"),
            "least",
        ),
        (
            &GOOD.replace("count = { min = 1 }", "count = { }"),
            "`count`",
        ),
        (
            &GOOD.replace("count = { min = 1 }", "count = { eq = 1, min = 1 }"),
            "`count`",
        ),
        (
            &GOOD.replace("count = { min = 1 }", "count = { min = 3, max = 1 }"),
            "`count`",
        ),
        (&GOOD.replace("count = { min = 1 }\n", ""), "`count`"),
        (&GOOD.replace("log = \"dump.log\"\n", ""), "`log`"),
        (&GOOD.replace("dump.log", "../dump.log"), "`log`"),
        (
            &GOOD.replace("pattern = \"LD\"", "pattern = \"\""),
            "`pattern`",
        ),
        (&GOOD.replace("id = \"a\"", "id = \"A b\""), "`id`"),
        (
            &GOOD.replace("role = \"pass\"", "role = \"empty-ns\""),
            "role = \"pass\"",
        ),
        (
            &GOOD.replace("pattern = \"LD\"", "pattern = \"LD\"\nglob = \"x\""),
            "`glob`",
        ),
        (&GOOD.replace("pattern = \"LD\"", "pattern = 3"), "pattern"),
        (&format!("{GOOD}{GOOD}"), "duplicate"),
        (
            &format!(
                "{GOOD}[[assertion]]\nid = \"f\"\nrole = \"x\"\ndescription = \"d\"\nkind = \"files\"\nglob = \"im*/a.img\"\ncount = {{ eq = 0 }}\n"
            ),
            "`glob`",
        ),
        (
            &format!(
                "{GOOD}[[assertion]]\nid = \"n\"\nrole = \"x\"\ndescription = \"d\"\nkind = \"netstate\"\nfile = \"a.json\"\ncheck = \"lo-up-127\"\n"
            ),
            "`expect`",
        ),
        (
            &format!(
                "{GOOD}[[assertion]]\nid = \"n\"\nrole = \"x\"\ndescription = \"d\"\nkind = \"netstate\"\nfile = \"a.json\"\ncheck = \"equals\"\n"
            ),
            "`other`",
        ),
        (
            &format!(
                "{GOOD}[[assertion]]\nid = \"n\"\nrole = \"x\"\ndescription = \"d\"\nkind = \"netstate\"\nfile = \"a.json\"\ncheck = \"same\"\n"
            ),
            "`check`",
        ),
        (&GOOD.replace("description = \"d\"\n", ""), "description"),
        ("this is = not toml [", "probes/test.toml"),
    ];
    for (body, key) in cases {
        let e = err(body);
        assert!(e.contains("probes/test.toml"), "{e}");
        assert!(e.contains(key), "expected {key} in: {e}");
    }
    let e = ProbeSpec::from_toml("x.toml", GOOD).unwrap_err();
    assert!(e.to_string().contains("rung"), "{e}");
    let e = ProbeSpec::from_toml(
        "x.toml",
        &format!("rung = \"bogus\"\nquestion = \"q\"\n{GOOD}"),
    )
    .unwrap_err();
    assert!(e.to_string().contains("`rung`"), "{e}");
}

#[test]
fn bounds_hold_as_written() {
    let _baton = crate::common::baton(module_path!());
    let b = |eq, min, max| Bound { eq, min, max };
    assert!(b(Some(0), None, None).holds(0));
    assert!(!b(Some(0), None, None).holds(1));
    assert!(b(None, Some(1), None).holds(1) && !b(None, Some(1), None).holds(0));
    assert!(b(None, None, Some(64)).holds(64) && !b(None, None, Some(64)).holds(65));
    assert!(b(None, Some(1), Some(2)).holds(2) && !b(None, Some(1), Some(2)).holds(3));
    assert_eq!(b(None, Some(1), Some(2)).describe(), ">= 1 and <= 2");
}
