"""Unit tests of the provider's decision logic: slot paths, which verb start runs for which
phase, the ports get_ip_address reports, errors carrying netprobe's words. The netprobe binary
is a fake here (a script recording its arguments and answering canned JSON); the real binary
is driven by tests/osworld_client.rs."""

import json
import os
import stat
import sys
import tempfile
import unittest

from desktop_env.providers.base import Provider, VMManager

from netprobe_osworld import (NetprobeError, NetprobeProvider, NetprobeVMManager, SlotPath,
                              SlotPathError)

FAKE = """#!%s
import json, os, sys
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
verb = sys.argv[2]
answer = json.loads(os.environ.get("FAKE_" + verb.upper(), '{"verb": "%%s"}' %% verb))
if isinstance(answer, dict) and "exit" in answer:
    sys.stderr.write(answer["stderr"])
    sys.exit(answer["exit"])
print(json.dumps(answer))
"""


class Fake:
    def __init__(self, tmp):
        self.bin = os.path.join(tmp, "netprobe")
        with open(self.bin, "w") as f:
            f.write(FAKE % sys.executable)
        os.chmod(self.bin, os.stat(self.bin).st_mode | stat.S_IEXEC)
        self.log = os.path.join(tmp, "calls.log")
        os.environ["FAKE_LOG"] = self.log

    def calls(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            return [json.loads(line)[1] for line in f]


class ProviderTests(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.fake = Fake(self.tmp)
        self.sd = os.path.join(self.tmp, "slots")
        self.slot = os.path.join(self.sd, "slot-3")
        for k in list(os.environ):
            if k.startswith("FAKE_") and k != "FAKE_LOG":
                del os.environ[k]
        self.p = NetprobeProvider(netprobe=self.fake.bin, profile="/p.toml",
                                  publish=["127.0.0.1:25999:5000"], provision_args=["--x"])

    def test_interfaces_are_osworlds(self):
        self.assertIsInstance(self.p, Provider)
        self.assertIsInstance(NetprobeVMManager(self.sd), VMManager)

    def test_slot_paths(self):
        self.assertEqual(SlotPath.parse(self.slot), SlotPath(self.sd, 3))
        self.assertEqual(str(SlotPath.parse(self.slot + "/")), self.slot)
        for bad in ["slot-3", "/x/slot-", "/x/slot-a", "/x/vm.vmx"]:
            with self.assertRaises(SlotPathError) as e:
                SlotPath.parse(bad)
            self.assertIn("<state dir>/slot-<N>", str(e.exception))

    def test_start_of_a_fresh_slot_provisions_snapshots_and_restores(self):
        out = self.p.start_emulator(self.slot, True, "Ubuntu")
        self.assertEqual([o["verb"] for o in out], ["provision", "snapshot", "restore"])
        self.assertEqual(self.fake.calls(), ["provision", "snapshot", "restore"])
        with open(self.fake.log) as f:
            first = json.loads(f.readline())
        self.assertEqual(first[:7], ["slot", "provision", "--slot", "3", "--state-dir", self.sd,
                                     "--json"])
        self.assertEqual(first[7:], ["--profile", "/p.toml", "--publish", "127.0.0.1:25999:5000",
                                     "--x"])

    def test_start_by_phase(self):
        os.makedirs(self.slot)
        for phase, verbs in [("ready", []), ("running", []), ("checkpointed", ["restore"]),
                             ("restore-failed", ["restore"])]:
            os.environ["FAKE_STATUS"] = json.dumps({"state": {"phase": phase}})
            os.remove(self.fake.log) if os.path.exists(self.fake.log) else None
            self.p.start_emulator(self.slot, True)
            self.assertEqual(self.fake.calls(), ["status"] + verbs, phase)
        os.environ["FAKE_STATUS"] = json.dumps({"state": {"phase": "clean"}})
        with self.assertRaises(NetprobeError) as e:
            self.p.start_emulator(self.slot, True)
        self.assertIn("phase 'clean'", str(e.exception))

    def test_ip_address_reports_published_host_ports(self):
        os.environ["FAKE_STATUS"] = json.dumps({"state": {"published_ports": [
            {"host_addr": "127.0.0.1", "host_port": 25999, "guest_port": 5000},
            {"host_addr": "127.0.0.1", "host_port": 26000, "guest_port": 8006}]}})
        self.assertEqual(self.p.get_ip_address(self.slot), "127.0.0.1:25999:0:26000:0")
        os.environ["FAKE_STATUS"] = json.dumps({"state": {"published_ports": []}})
        with self.assertRaises(NetprobeError) as e:
            self.p.get_ip_address(self.slot)
        self.assertIn("--publish 127.0.0.1:PORT:5000", str(e.exception))

    def test_a_failed_verb_raises_with_netprobes_words_and_exit_code(self):
        os.environ["FAKE_RESET"] = json.dumps({"exit": 1, "stderr": "gate pixels-equal NOT PROVEN\n"})
        with self.assertRaises(NetprobeError) as e:
            self.p.revert_to_snapshot(self.slot, "init_state")
        self.assertEqual((e.exception.verb, e.exception.exit_code), ("reset", 1))
        self.assertEqual(e.exception.message, "gate pixels-equal NOT PROVEN")

    def test_revert_to_another_snapshot_name_is_refused(self):
        self.p.save_state(self.slot, "init_state")
        self.assertEqual(self.p.revert_to_snapshot(self.slot, "init_state"), self.slot)
        with self.assertRaises(NetprobeError) as e:
            self.p.revert_to_snapshot(self.slot, "other")
        self.assertIn("holds snapshot 'init_state', not 'other'", str(e.exception))


class ManagerTests(unittest.TestCase):
    def test_hands_out_free_slots_one_per_live_process(self):
        sd = os.path.join(tempfile.mkdtemp(), "slots")
        m = NetprobeVMManager(sd, first_slot=5)
        a = m.get_vm_path()
        self.assertEqual(a, os.path.join(sd, "slot-5"))
        self.assertEqual(m.get_vm_path(), os.path.join(sd, "slot-6"))  # slot-5 is ours, live
        m.occupy_vm(a, 2 ** 22 + 12345)  # a pid that does not exist
        self.assertIn(a, m.list_free_vms())
        os.makedirs(a)  # a slot folder, once made, is never handed out again
        self.assertNotIn(a, m.list_free_vms())
        m.check_and_clean()
        self.assertTrue(m.registry.endswith("slots.osworld.json"))
        self.assertFalse(os.path.exists(os.path.join(sd, "osworld.json")))


if __name__ == "__main__":
    unittest.main()
