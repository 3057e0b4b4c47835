#!/usr/bin/env python3
# Field tier, inside the Debian 13 guest (tests/field/exec.sh): the CRI side of the exec-window
# measurements (issue 13), over containerd's CRI socket with cri.py's client. Kept apart from
# exec.sh's shell so one Python start (grpc import, api.proto) serves N exec calls.
#
#   exec_cri.py GEN_DIR up FILE [NAME [KEY=VALUE...]]
#                                           a pod + one container in tenant-a; without NAME the pod
#                                           "exec" of group exec-k (a pod annotation), with NAME a
#                                           pod NAME without pod annotations whose container has
#                                           the annotations KEY=VALUE; writes "POD_ID CONTAINER_ID
#                                           INIT_PID SANDBOX_PID" into FILE
#   exec_cri.py GEN_DIR exec CID N CMD...   N sequential ExecSync of CMD in CID; per call one line
#                                           "<wall us> <exit code> <stdout's first line>"
#   exec_cri.py GEN_DIR stream CID N CMD... the same with CRI Exec, as `kubectl exec` reaches it:
#                                           the URL of containerd's streaming server, read over a
#                                           WebSocket (kubelet.stream_exec, v4.channel.k8s.io)
#   exec_cri.py GEN_DIR down POD_ID         stop and remove the pod
"""ExecSync and CRI Exec probes of the field tier's exec-window measurements."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cri as base  # noqa: E402
import kubelet  # noqa: E402


def load(gen):
    """api_pb2 from GEN_DIR (compiled there by cri.py earlier in the boot), else compile it."""
    if os.path.exists(os.path.join(gen, "api_pb2.py")):
        sys.path.insert(0, gen)
        import api_pb2

        return api_pb2
    return base.compile_proto(gen)


def main():
    gen, what, *rest = sys.argv[1:]
    cri = base.Cri(load(gen))
    pb = cri.pb
    if what == "up":
        if len(rest) > 1:
            name, pod_ann = rest[1], {}
            ctr_ann = dict(kv.split("=", 1) for kv in rest[2:])
        else:
            name, pod_ann, ctr_ann = "exec", {base.G: "exec-k"}, {}
        sb = cri.sandbox_config(name, "tenant-a", pod_ann, "burstable")
        pod = cri.run_pod(sb)
        cid = cri.create(pod, sb, "c", ["/bin/sleep", "3600"], ctr_ann)
        cri.start(cid)
        with open(rest[0], "w") as f:
            f.write(f"{pod} {cid} {cri.pid(cid)} {cri.sandbox_pid(pod)}\n")
        return 0
    if what in ("exec", "stream"):
        cid, n, cmd = rest[0], int(rest[1]), rest[2:]
        rc = 0
        for _ in range(n):
            t0 = time.monotonic()
            try:
                if what == "exec":
                    r = cri.call("ExecSync", pb.ExecSyncRequest(container_id=cid, cmd=cmd, timeout=30), pb.ExecSyncResponse, timeout=60)
                    code, out = r.exit_code, r.stdout.decode(errors="replace")
                else:
                    code, out, _ = kubelet.stream_exec(cri, cid, cmd)
                us = int((time.monotonic() - t0) * 1e6)
                first = (out.splitlines() or [""])[0]
                print(f"{us} {code} {first}", flush=True)
            except (cri.grpc.RpcError, OSError, ValueError) as e:
                us = int((time.monotonic() - t0) * 1e6)
                why = f"{e.code().name}: {e.details()}" if isinstance(e, cri.grpc.RpcError) else f"{type(e).__name__}: {e}"
                print(f"{us} {what}-error {why}".replace("\n", " "), flush=True)
                rc = 1
        return rc
    if what == "down":
        pod = rest[0]
        cri.call("StopPodSandbox", pb.StopPodSandboxRequest(pod_sandbox_id=pod), pb.StopPodSandboxResponse)
        cri.call("RemovePodSandbox", pb.RemovePodSandboxRequest(pod_sandbox_id=pod), pb.RemovePodSandboxResponse)
        return 0
    raise SystemExit(f"exec_cri.py: unknown command {what!r}")


if __name__ == "__main__":
    sys.exit(main())
