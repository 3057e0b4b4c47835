# Entry points. `make test` is the README's test command and what CI runs.
.PHONY: build test test-host vm-tier field-tier field-fixtures demo bench bench-breakdown bench-vm bench-exec bench-follow bench-isolation bench-footprint bench-heal bench-split bench-ab bench-instructions

build:
	cargo build --release --locked

test:
	scripts/test-all.sh

# Tiers 1-2 only (no VM).
test-host:
	OCH_SKIP_VM=1 scripts/test-all.sh

vm-tier:
	tests/vm/tier.sh

# Tier 5: Debian 13's containerd CRI, podman 5, crun and runc in the real-kernel VM
# (tests/field/). `make field-fixtures` also refreshes tests/fixtures/field/ from that run.
field-tier:
	tests/field/run.sh

field-fixtures:
	tests/field/run.sh --update-fixtures

# Two containers of one group share a cookie, a third is isolated: real runc on a real
# CONFIG_SCHED_CORE kernel in a VM.
demo:
	tests/vm/demo.sh

# .deb, .rpm and the Kubernetes node-installer image (installs cargo-deb/cargo-generate-rpm when
# missing). See packaging/README.md.
.PHONY: package test-packaging
package:
	scripts/package.sh

# packaging/kubernetes/daemonset.yaml from the Helm chart (packaging/helm/oci-coresched-hook)
# rendered with the real Helm engine, and the chart's copies of the alerting rules and the
# dashboard. Needs helm-python-sdk (pip, in a venv: scripts/test-all.sh makes one).
.PHONY: chart
chart:
	scripts/helm.py sync

# Builds the packages, checks their contents, installs the .deb here (root), runs containers
# through it with podman and runc, removes and purges it.
test-packaging:
	tests/packaging/run.sh

# Speed (BENCHMARKS.md): whole-process table vs /bin/true over the fake kernel, then criterion,
# then the VM rows of bench-vm (real kernel; OCH_BENCH_SKIP_VM=1 leaves them out).
bench:
	scripts/bench.sh

# Where the share path's time goes: a hook built with the phase marks (feature phase-timing), over
# the fake kernel only.
bench-breakdown:
	OCH_BENCH_TIMING=1 OCH_BENCH_ONLY=share,lifecycle,floor OCH_BENCH_SKIP_CRITERION=1 OCH_BENCH_SKIP_VM=1 scripts/bench.sh

# The real kernel in the VM tier (TCG, minutes): the process bench's share, create, lifecycle and
# floor scenarios against /bin/true in the guest, and the hook's share of `runc run -d` and
# `runc delete` (benches/vm-runc.sh).
bench-vm:
	benches/vm-share.sh

# The exec window: 200 probes each of runc exec, crun exec, podman exec, nsenter, CRI
# ExecSync and CRI Exec (streaming) in the field tier's guest (real kernel, TCG), the exec part
# only, on the quiet node and again under a fork storm; per engine and condition the share of
# probes that had the group's cookie at their first read and the window of the rest
# (target/field/exec-table.md). The test command runs the same part with fewer probes per engine.
bench-exec:
	OCH_FIELD_PARTS=exec OCH_EXEC_N=200 OCH_EXEC_COST_N=3 OCH_FIELD_KEEP=1 OCH_FIELD_TIMEOUT=14400 tests/field/run.sh

# Isolation itself on the real kernel in the VM (TCG): pairs of co-run recorders pinned to the two
# SMT siblings, as runc and crun containers of one group, of two tenants, of two groups, against a
# host process; the share of time both ran, beside a control pair, written as BENCHMARKS.md's table
# (scripts/bench-isolation.sh; OCH_ISO_SECONDS per measurement, default 6).
bench-isolation:
	scripts/bench-isolation.sh

# The follower's CPU per process event, natively on this host (root): `reconcile --follow` over the
# fake kernel with one live member, a fork storm of 10,000 forks/s outside every member cgroup
# (scripts/bench-follow.sh; OCH_BENCH_RATE, OCH_BENCH_SECONDS, OCH_BENCH_RUNS).
bench-follow:
	scripts/bench-follow.sh

# The DaemonSet containers' memory and CPU at a 110-pod node's churn, natively (root): the follower
# over 110 members while a pod a second is replaced and probes enter them, the NRI plugin against
# examples/nri-churn.rs creating containers; peak RSS and millicores, which size the manifest's
# requests and limits (scripts/bench-footprint.sh; OCH_BENCH_PODS, OCH_BENCH_SECONDS, OCH_BENCH_RATE).
bench-footprint:
	scripts/bench-footprint.sh

# The follower's heal bound, natively (root): containers whose createRuntime hook failed open (the
# state lock held past lock_timeout_ms, or config.toml invalid) in a runc-style runtime root, the
# cause cleared at a random point of the escape scan's 2 s period, and the time until each holds its
# group's cookie, against 10 s at p99 (scripts/bench-heal.sh; OCH_BENCH_ROUNDS, OCH_BENCH_CONTAINERS;
# target/bench-heal/summary.md).
bench-heal:
	scripts/bench-heal.sh

# One binary or two: the hook's stages as the shipped binary against examples/hook-only.rs (the
# same library, only the hook reachable), alternating rounds (scripts/bench-split.sh).
bench-split:
	scripts/bench-split.sh

# The hook's rows against earlier commits, alternating rounds (scripts/bench-ab.sh; BASE=<commit>, or
# several: BASE="0.1.0=<commit> <commit>";
# its build kept under target/bench-ab/<commit>).
bench-ab:
	BASE="$(BASE)" scripts/bench-ab.sh

# The hook's stages in instructions and syscalls (valgrind's callgrind, strace), which the machine's
# load does not move: one run of each stage, this tree and optionally BASE's commits
# (scripts/bench-instructions.sh).
bench-instructions:
	BASE="$(BASE)" scripts/bench-instructions.sh

# Fuzzing (cargo-fuzz, fuzz/): state JSON, annotations + config -> decision, config file. `make fuzz`
# runs each target for FUZZ_SECONDS (default 600) from the committed seeds; `make fuzz-short` is the
# bounded run of the test command (20 s per target).
.PHONY: fuzz fuzz-short
FUZZ_SECONDS ?= 600
fuzz:
	FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz-short.sh

fuzz-short:
	scripts/fuzz-short.sh
