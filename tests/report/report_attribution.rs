//! The report's three-way attribution and images tree on a real `netprobe run --phases
//! kernel,criu --netns rich` folder (real CRIU, root): the criu rung shows live before ↔
//! images ↔ live after side by side, the route in table 100 that `ip route save` drops at the
//! dump marked in the images and after columns and attributed to the dump, and the decoded
//! images tree (`netprobe images`) — in Markdown (bold) and HTML (`class="differs"`, escaped,
//! the tree in a `<pre>`).

use crate::common;
use common::cli::netprobe;

/// `netprobe run --phases kernel,criu --netns NETNS --evidence EV --quiet`.
fn criu_run(ev: &str, netns: &str) -> std::process::Output {
    netprobe(&[
        "run",
        "--phases",
        "kernel,criu",
        "--netns",
        netns,
        "--evidence",
        ev,
        "--quiet",
    ])
}

#[test]
fn report_shows_three_way_attribution_and_images_tree_per_rung() {
    let _baton = crate::common::baton(module_path!());
    let t = tempfile::tempdir().unwrap();
    let ev = t.path().join("ev");
    let evs = ev.to_str().unwrap();
    let o = criu_run(evs, "rich");
    assert!(
        ev.join("criu/netstate-after.json").is_file() && ev.join("criu/images").is_dir(),
        "the criu rung ran: {}",
        String::from_utf8_lossy(&o.stderr)
    );

    let o = netprobe(&["report", evs, "--format", "md"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let md = std::fs::read_to_string(ev.join("report.md")).unwrap();
    assert!(
        md.contains("#### `criu`: live before ↔ images ↔ live after"),
        "{md}"
    );
    assert!(
        md.contains("| kind | fact | live before | images | live after | lost at |"),
        "{md}"
    );
    assert!(
        md.contains("| route | inet table 100 10.216.0.0/24 oif 3 | unicast proto boot scope link | **—** | **—** | dump (the image lacks it) |"),
        "the table-100 route, marked and attributed to the dump: {md}"
    );
    assert!(md.contains("lost at dump: 1"), "{md}");
    assert!(
        md.contains("What the images hold ([criu/images](./criu/images)"),
        "{md}"
    );
    assert!(md.contains("```text\n"), "{md}");
    assert!(
        md.contains("np0 ifindex 3 type veth mtu 1789 mac 02:00:00:00:0e:01"),
        "{md}"
    );
    assert!(
        md.contains("inet pref 1000 from 10.214.0.0/24 to all lookup 100"),
        "{md}"
    );
    assert!(
        !md.contains("#### `kernel`"),
        "the kernel rung has no images"
    );

    let o = netprobe(&["report", evs, "--format", "html"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = std::fs::read_to_string(ev.join("report.html")).unwrap();
    assert!(
        html.contains("<h4 id=\"network-criu\">criu: live before ↔ images ↔ live after</h4>"),
        "{html}"
    );
    assert!(html.contains("<th>live before</th><th>images</th><th>live after</th>"));
    assert!(
        html.contains("<tr><td>route</td><td><code>inet table 100 10.216.0.0/24 oif 3</code></td><td>unicast proto boot scope link</td><td class=\"differs\">—</td><td class=\"differs\">—</td><td>dump (the image lacks it)</td></tr>"),
        "{html}"
    );
    let pre = html
        .split("<pre class=\"images\">")
        .nth(1)
        .and_then(|s| s.split("</pre>").next())
        .expect("the images tree in a <pre>");
    assert!(pre.contains("np1 ifindex 2 type veth mtu 1789"), "{pre}");
    assert!(pre.contains("table inet np14 {"), "{pre}");
    assert!(!pre.contains('<'), "the tree is escaped: {pre}");
}

/// A criu rung whose two live states agree says only that: the images are not compared fact by
/// fact there, so the sentence claims nothing about them.
#[test]
fn agreeing_live_states_claim_nothing_about_the_images() {
    let _baton = crate::common::baton(module_path!());
    let t = tempfile::tempdir().unwrap();
    let ev = t.path().join("ev");
    let evs = ev.to_str().unwrap();
    let o = criu_run(evs, "lo");
    assert!(
        ev.join("criu/netstate-after.json").is_file(),
        "the criu rung ran: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    for (format, file) in [("md", "report.md"), ("html", "report.html")] {
        let o = netprobe(&["report", evs, "--format", format]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let page = std::fs::read_to_string(ev.join(file)).unwrap();
        assert!(
            page.contains("Live before and live after agree: no fact differs between them")
                && !page.contains("images and live after agree"),
            "{page}"
        );
    }
}
