//! `netprobe run --netns rich` on real CRIU and real runc (root): what each step keeps of a
//! namespace with real content. Plain CRIU 4.2.1 keeps everything it saves — links (veth pair,
//! MAC, MTU 1789), addresses with flags, the main-table routes, the policy rule, the sysctls it
//! saves, the iptables rule and nftables table, no lock left behind — and loses exactly the
//! route in table 100 at the dump (`ip route save` writes table main only, criu/net.c), plus the
//! two sysctls it does not save. runc (empty_ns) keeps nothing: every loss is the runtime's
//! choice. The external-netns rung keeps everything. `verify` recomputes all of it, and
//! `netprobe images` reads every network image of the criu rung.

use crate::common;
use common::cli::netprobe;
use serde_json::Value;

fn attribution<'a>(result: &'a Value, rung: &str) -> &'a Value {
    let r = result["rungs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == rung)
        .unwrap();
    &r["facts"]["attribution"]
}

#[test]
fn rich_namespace_through_the_ladder() {
    let _baton = crate::common::baton(module_path!());
    crate::common::require_root();
    let tmp = tempfile::tempdir().unwrap();
    let ev = tmp.path().join("ev");
    let evs = ev.to_str().unwrap();
    let o = netprobe(&["run", "--netns", "rich", "--evidence", evs, "--json"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let result: Value =
        serde_json::from_slice(&std::fs::read(ev.join("netprobe-result.json")).unwrap()).unwrap();
    netprobe::evidence::validate_result(&result).expect("schema");
    assert_eq!(
        result["verdict"]["code"], "criu-netns",
        "{}",
        result["verdict"]
    );
    let summary = result["verdict"]["summary"].as_str().unwrap();
    assert!(
        summary.contains("lost facts by step (criu/attribution): dump 1"),
        "{summary}"
    );

    // criu: exactly the table-100 route lost at the dump, and the two sysctls CRIU does not save.
    let a = attribution(&result, "criu");
    assert_eq!(a["network_images"], true);
    let changed = a["changed"].as_array().unwrap();
    let dump: Vec<&Value> = changed.iter().filter(|r| r["lost_at"] == "dump").collect();
    assert_eq!(dump.len(), 1, "{changed:#?}");
    assert_eq!(dump[0]["kind"], "route");
    assert!(
        dump[0]["key"]
            .as_str()
            .unwrap()
            .contains("table 100 10.216.0.0/24")
    );
    assert!(dump[0]["image"].is_null());
    let not_saved: Vec<&str> = changed
        .iter()
        .filter(|r| r["lost_at"] == "not-covered-by-criu")
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        not_saved,
        ["net.ipv4.ip_default_ttl", "net.ipv4.tcp_syncookies"]
    );
    assert_eq!(changed.len(), 3, "{changed:#?}");
    let lock = result["rungs"][1]["assertions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"] == "no-criu-lock-after-restore")
        .unwrap();
    assert_eq!(lock["passed"], true, "{lock}");

    // oci (runc, empty_ns): every loss is the runtime's choice; external-netns keeps all.
    let oci = attribution(&result, "oci");
    assert_eq!(oci["network_images"], false);
    let rows = oci["changed"].as_array().unwrap();
    assert!(
        rows.iter()
            .any(|r| r["key"] == "np0 if3" && r["lost_at"] == "runtime-choice")
    );
    assert!(
        rows.iter()
            .all(|r| r["lost_at"] == "runtime-choice" || r["lost_at"].is_null())
    );
    let ext = attribution(&result, "external-netns");
    assert_eq!(ext["changed"].as_array().unwrap().len(), 0, "{ext}");

    let v = netprobe(&["verify", evs]);
    assert_eq!(
        v.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&v.stdout)
    );

    let i = netprobe(&["images", ev.join("criu").to_str().unwrap(), "--json"]);
    assert!(i.status.success(), "{}", String::from_utf8_lossy(&i.stderr));
    let imgs: Value = serde_json::from_slice(&i.stdout).unwrap();
    assert_eq!(
        imgs["namespaces"][0]["files"].as_array().unwrap().len(),
        9,
        "{imgs}"
    );

    // The report data: a three-column section per runtime rung.
    let sections = netprobe::probe::attribution_view::sections(&ev);
    assert_eq!(sections.len(), 3);
    let md = netprobe::probe::attribution_view::render_markdown(
        sections[0].rung,
        sections[0].attribution.as_ref().unwrap(),
    );
    assert!(
        md.contains("| route | inet table 100 10.216.0.0/24 oif 3 |"),
        "{md}"
    );
}
