#!/usr/bin/env python3
# Field tier, on the host (tests/field/run.sh --update-fixtures): picks from the states the guest's
# capture hook kept (STATES/<phase>/<id>.<ns>.<status>.json, <id>.config.json) one container per
# engine and runtime and writes its states, named by stage, into OUT (tests/fixtures/field/):
#
#   containerd-runc-*    pod tenant-a/web2, container "web" (group web named by its annotation)
#   containerd-crun-*    pod tenant-a/crun1 under the crun handler (group web from the pod)
#   containerd-runc-be-* pod tenant-a/be (BestEffort), container "c2": createRuntime and config only
#   podman-crun-*, podman-runc-*   the first tenant-a/web container of each run
#
# Stages: the first state of a container is createRuntime, the second poststart, the stopped one
# poststop (the order the hooks.d file and the base spec name them). Bytes are copied unchanged.
"""Write the field tier's captured states as fixtures."""

import json
import os
import shutil
import sys


def containers(phase_dir):
    """id -> {"states": [(ns, status, path)], "config": path or None} for one phase."""
    out = {}
    for name in os.listdir(phase_dir):
        if name.startswith("."):
            continue
        cid, rest = name.split(".", 1)
        entry = out.setdefault(cid, {"states": [], "config": None})
        if rest == "config.json":
            entry["config"] = os.path.join(phase_dir, name)
        else:
            ns, status, _ = rest.split(".")
            entry["states"].append((int(ns), status, os.path.join(phase_dir, name)))
    for e in out.values():
        e["states"].sort()
    return out


def annotations(entry):
    with open(entry["states"][0][2]) as f:
        return json.load(f).get("annotations", {})


def stages(entry, need_poststop=True):
    live = [p for _, st, p in entry["states"] if st != "stopped"]
    stopped = [p for _, st, p in entry["states"] if st == "stopped"]
    got = {"createRuntime": live[0] if live else None, "poststart": live[1] if len(live) > 1 else None}
    if need_poststop:
        got["poststop"] = stopped[0] if stopped else None
    return got


def pick(cs, pred):
    found = [e for e in cs.values() if e["states"] and pred(annotations(e))]
    found.sort(key=lambda e: e["states"][0][0])
    return found[0] if found else None


def write(out, family, entry, need_poststop=True):
    if entry is None:
        raise SystemExit(f"fixtures.py: no captured container for {family}")
    files = stages(entry, need_poststop)
    missing = [s for s, p in files.items() if p is None] + ([] if entry["config"] else ["config"])
    if missing:
        raise SystemExit(f"fixtures.py: {family}: no state captured for {', '.join(missing)}")
    for stage, path in files.items():
        shutil.copyfile(path, os.path.join(out, f"{family}-{stage}.json"))
    shutil.copyfile(entry["config"], os.path.join(out, f"{family}-config.json"))
    print(f"fixtures.py: {family}: {', '.join(files)} and config.json")


def main():
    states, out = sys.argv[1:3]
    os.makedirs(out, exist_ok=True)
    cri = containers(os.path.join(states, "containerd-runc"))
    pod = "io.kubernetes.cri.sandbox-name"
    ctr = "io.kubernetes.cri.container-name"
    write(out, "containerd-runc", pick(cri, lambda a: a.get(pod) == "web2" and a.get(ctr) == "web"))
    write(out, "containerd-crun", pick(cri, lambda a: a.get(pod) == "crun1" and a.get(ctr) == "web"))
    write(out, "containerd-runc-be", pick(cri, lambda a: a.get(pod) == "be" and a.get(ctr) == "c2"), False)
    for rt in ["crun", "runc"]:
        cs = containers(os.path.join(states, f"podman-{rt}"))
        write(out, f"podman-{rt}", pick(cs, lambda a: a.get("io.kubernetes.pod.namespace") == "tenant-a"))


if __name__ == "__main__":
    main()
