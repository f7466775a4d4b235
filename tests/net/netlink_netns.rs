//! Integration tests against the real kernel (root): every test runs in a fresh netns made by
//! `unshare(CLONE_NEWNET)` in its own thread, so the process's netns never changes and the
//! netns (with every link created in it) is released when the thread ends, on success, failure
//! or panic.

use std::net::{IpAddr, Ipv4Addr};

use netprobe::netlink::{
    self, ARPHRD_LOOPBACK, IFF_UP, NetState, NetlinkError, capture, create_veth_pair,
    create_veth_pairs, delete_link, dump_links_criu, link_index, set_link_up,
};

/// Runs `f` in a thread inside a fresh netns (only that thread's netns changes).
fn in_fresh_netns<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    netprobe::ns::run_in_fresh_netns(f).expect("unshare(CLONE_NEWNET)")
}

#[test]
fn fresh_netns_has_only_lo_down_type_772() {
    let _baton = crate::common::baton(module_path!());
    let dump = in_fresh_netns(|| dump_links_criu().expect("dump"));
    assert_eq!(dump.request, netlink::criu_link_dump_request().to_vec());
    assert_eq!(dump.links.len(), 1, "{:?}", dump.links);
    let lo = &dump.links[0];
    assert_eq!(
        (lo.ifindex, lo.link_type, lo.name.as_str()),
        (1, ARPHRD_LOOPBACK, "lo")
    );
    assert_eq!(lo.flags & IFF_UP, 0, "lo starts DOWN");
    assert_eq!(lo.criu_log_line(), "\tLD: Got link 1, type 772");
    // The reply ends with NLMSG_DONE (type 3) of seq 24680 and re-decodes identically.
    assert_eq!(
        netlink::decode_link_replies(&dump.reply).unwrap(),
        dump.links
    );
}

#[test]
fn lo_up_gets_127_0_0_1_and_captures_are_byte_equal() {
    let _baton = crate::common::baton(module_path!());
    let (before, after, again) = in_fresh_netns(|| {
        let before = capture().expect("capture before");
        let lo = link_index("lo").expect("lo");
        assert_eq!(lo, 1);
        set_link_up(lo).expect("set lo up");
        let after = capture().expect("capture after");
        let again = capture().expect("capture again");
        (before, after, again)
    });
    assert!(!before.lo().expect("lo").up);
    assert!(!before.lo_up_with_127());
    assert!(before.addresses.is_empty(), "{:?}", before.addresses);

    let lo = after.lo().expect("lo");
    assert!(lo.up && lo.flags & IFF_UP != 0);
    assert_eq!(lo.link_type, 772);
    assert!(after.lo_up_with_127(), "{}", after.to_canonical_json());
    assert!(after.routes.iter().any(|r| r.table == 255
        && r.dst == "127.0.0.0/8"
        && r.route_type == "local"
        && r.prefsrc.as_deref() == Some("127.0.0.1")));

    let json = after.to_canonical_json();
    assert_eq!(json, again.to_canonical_json(), "two captures byte-equal");
    assert!(json.ends_with("}\n"));
    assert!(
        json.contains("\n  \"links\": [\n    {\n      \"ifindex\": 1,\n"),
        "{json}"
    );
    assert_eq!(NetState::from_json(&json).unwrap(), after);
    assert!(after.diff(&again).is_empty());
    assert!(!before.diff(&after).is_empty());
}

#[test]
fn diff_shows_added_address() {
    let _baton = crate::common::baton(module_path!());
    let (before, after) = in_fresh_netns(|| {
        set_link_up(1).unwrap();
        let before = capture().unwrap();
        netlink::add_address(1, IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)), 8).unwrap();
        (before, capture().unwrap())
    });
    let diff = before.diff(&after);
    assert!(!diff.is_empty());
    assert!(
        diff.iter()
            .any(|l| l.starts_with("+ addresses: ") && l.contains("\"127.0.0.2\"")),
        "{diff:#?}"
    );
    assert!(
        diff.iter().all(|l| l.starts_with("+ ")),
        "only additions: {diff:#?}"
    );
}

#[test]
fn mutations_surface_kernel_errors() {
    let _baton = crate::common::baton(module_path!());
    in_fresh_netns(|| {
        let e = link_index("nosuchlink0").unwrap_err();
        assert_eq!(e.errno(), Some(libc::ENODEV), "{e}");
        let e = set_link_up(9999).unwrap_err();
        assert!(
            matches!(e, NetlinkError::Kernel { errno, .. } if errno == libc::ENODEV),
            "{e}"
        );
        create_veth_pair("npdupa", "npdupb").unwrap();
        let e = create_veth_pair("npdupa", "npdupc").unwrap_err();
        assert_eq!(e.errno(), Some(libc::EEXIST), "{e}");
        assert!(e.to_string().contains("create_veth_pair"), "{e}");
        let e = create_veth_pair("a-name-longer-than-15", "x").unwrap_err();
        assert!(matches!(e, NetlinkError::InvalidArgument { .. }));
        let ifindex = link_index("npdupa").unwrap();
        delete_link(ifindex).unwrap();
        assert_eq!(
            link_index("npdupb").unwrap_err().errno(),
            Some(libc::ENODEV)
        );
        assert_eq!(
            delete_link(ifindex).unwrap_err().errno(),
            Some(libc::ENODEV)
        );
    });
}

#[test]
fn hundred_veth_pairs_decode_to_201_links() {
    let _baton = crate::common::baton(module_path!());
    let (dump, state) = in_fresh_netns(|| {
        let names = create_veth_pairs("npv", 100).expect("create 100 pairs");
        assert_eq!(names.len(), 100);
        (
            dump_links_criu().expect("dump"),
            capture().expect("capture"),
        )
    });
    assert_eq!(dump.links.len(), 201);
    assert_eq!(state.links.len(), 201);
    assert_eq!(
        dump.links
            .iter()
            .filter(|l| l.kind.as_deref() == Some("veth"))
            .count(),
        200
    );
    let mut names: Vec<&str> = dump.links.iter().map(|l| l.name.as_str()).collect();
    names.sort();
    assert!(names.contains(&"npv99a") && names.contains(&"npv0b"));
}
