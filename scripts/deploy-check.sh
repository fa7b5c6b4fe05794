#!/usr/bin/env bash
# The deploy check (.ci/run runs it): the README's Deploy section, done the way a new user does it,
# minus the AWS account.
#
#   1. the pinned deploy toolchain (scripts/deploy-requirements.txt: aws-sam-cli, cargo-lambda with
#      its zig) into .venv/deploy; the Rust target for the template's architecture (arm64 as
#      shipped: `rustup target add aarch64-unknown-linux-gnu`; x86_64 only when that cannot be had,
#      and then it says so);
#   2. `sam validate --lint`;
#   3. `sam build` of template.yaml as shipped (every function built in its own package directory,
#      all of them into the one workspace target/ directory, so shared crates compile once);
#   4. for every function's built bootstrap: the expected architecture, under 10 MB, no glibc
#      symbol newer than AL2023's 2.34, no SQLite or PostgreSQL linked, and a start check
#      (scripts/lambda_start_check.py): started with the environment the template gives it, against
#      a local Lambda Runtime API stub (arm64 under qemu-user-static), it must reach its first
#      GET /2018-06-01/runtime/invocation/next with no configuration error — and refuse to start
#      without its required setting.
#
# Every step either passes or fails the script; nothing is skipped. Needs no Docker and no AWS
# credentials. Installs missing Debian packages (file, binutils, qemu-user-static and the arm64
# C runtime) as scripts/test.sh does.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
export CARGO_TERM_COLOR=never SAM_CLI_TELEMETRY=0
export AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
# One target directory for every function (and the rest of the workspace's builds).
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"

readonly MAX_BYTES=10000000          # "under 10 MB"
readonly MAX_GLIBC=2.34              # Amazon Linux 2023 (provided.al2023)
readonly ARM64_SYSROOT=/usr/aarch64-linux-gnu
# Parameters without a default, as an operator would answer them (only the start check uses them).
readonly START_PARAMS=(--param FromAddress=billing@example.com --param SenderIdentityName=example.com
    --param ManageUrl=https://billing.notice-ledger.dev/manage --param NoticeConfigBucket=notice-config-start-check)

started=$SECONDS
step() { printf '\n==> %s\n' "$*"; }
fail() { printf '\ndeploy-check: FAILED: %s\n' "$*" >&2; exit 1; }
elapsed() { local s=$(($1)); printf '%dm%02ds' $((s / 60)) $((s % 60)); }

# ------------------------------------------------------------------------------ 1. toolchain
step "deploy toolchain (scripts/deploy-requirements.txt) into .venv/deploy"
# Its own venv: aws-sam-cli pins a boto3/botocore other than the emulator's in .venv.
venv=.venv/deploy
if [[ ! -x $venv/bin/python ]]; then
    python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r scripts/deploy-requirements.txt
export PATH="$root/$venv/bin:$PATH"
py="$root/$venv/bin/python"
echo "$(sam --version) · $(cargo lambda --version) · zig $("$py" -m ziglang version) · $(cargo --version)"

template_arch=$("$py" scripts/lambda_start_check.py default-architecture template.yaml)
arch=$template_arch
case $arch in
    arm64) triple=aarch64-unknown-linux-gnu ;;
    x86_64) triple=x86_64-unknown-linux-gnu ;;
    *) fail "template.yaml's Architecture default is '$arch' (expected arm64 or x86_64)" ;;
esac
if ! rustc --print target-libdir --target "$triple" >/dev/null 2>&1 \
    || [[ ! -d $(rustc --print target-libdir --target "$triple") ]]; then
    echo "adding the Rust target $triple"
    if ! rustup target add "$triple"; then
        [[ $arch == arm64 ]] || fail "cannot add the Rust target $triple"
        printf '\n!!! The arm64 Rust target (%s) cannot be installed here (rustup target add failed).\n' "$triple"
        printf '!!! FALLING BACK TO x86_64: this run builds and checks x86_64 binaries, NOT the arm64\n'
        printf '!!! ones template.yaml ships by default.\n\n'
        arch=x86_64
        triple=x86_64-unknown-linux-gnu
    fi
fi

# System tools the binary checks need, installed once from Debian when missing.
packages=()
command -v file >/dev/null 2>&1 || packages+=(file)
command -v readelf >/dev/null 2>&1 || packages+=(binutils)
qemu=()
if [[ $arch == arm64 ]]; then
    command -v qemu-aarch64-static >/dev/null 2>&1 || packages+=(qemu-user-static)
    [[ -e $ARM64_SYSROOT/lib/ld-linux-aarch64.so.1 ]] || packages+=(libc6-arm64-cross)
    [[ -e $ARM64_SYSROOT/lib/libgcc_s.so.1 ]] || packages+=(libgcc-s1-arm64-cross)
    qemu=(qemu-aarch64-static -L "$ARM64_SYSROOT")
fi
if ((${#packages[@]})); then
    sudo=()
    [[ $(id -u) -eq 0 ]] || sudo=(sudo)
    "${sudo[@]}" apt-get update
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${packages[@]}"
fi

# ------------------------------------------------------------------------------ 2. validate
step "sam validate --lint"
sam validate --lint --template template.yaml

# ------------------------------------------------------------------------------ 3. build
build_args=(--template template.yaml)
if [[ $arch != "$template_arch" ]]; then
    build_args+=(--parameter-overrides "Architecture=$arch")
fi
step "sam build ${build_args[*]} ($arch, CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
build_started=$SECONDS
sam build "${build_args[@]}"
build_secs=$((SECONDS - build_started))
echo "sam build: $(elapsed build_secs)"

# ------------------------------------------------------------------------------ 4. the binaries
case $arch in
    arm64) machine=AArch64 ;;
    x86_64) machine='Advanced Micro Devices X86-64' ;;
esac
summary=()
checked=0
while read -r logical_id code_uri binary <&3; do
    step "$logical_id ($binary, $code_uri)"
    bootstrap=.aws-sam/build/$logical_id/bootstrap
    [[ -f $bootstrap ]] || fail "$logical_id: sam build left no $bootstrap"

    echo "    $(file -b "$bootstrap")"
    got_machine=$(readelf -h "$bootstrap" | sed -n 's/^ *Machine: *//p')
    [[ $got_machine == "$machine" ]] || fail "$logical_id: built for '$got_machine', expected '$machine' ($arch)"

    bytes=$(stat -c %s "$bootstrap")
    ((bytes < MAX_BYTES)) || fail "$logical_id: bootstrap is $bytes bytes (limit: under $MAX_BYTES)"

    glibc=$(readelf --dyn-syms -W "$bootstrap" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -Vu | tail -n 1)
    [[ -n $glibc ]] || fail "$logical_id: no GLIBC symbol versions found (not a glibc binary?)"
    newest=$(printf '%s\n%s\n' "$glibc" "$MAX_GLIBC" | sort -V | tail -n 1)
    if [[ $newest != "$MAX_GLIBC" ]]; then
        readelf --dyn-syms -W "$bootstrap" | grep -E "GLIBC_$glibc( |$)" >&2 || true
        fail "$logical_id: needs glibc $glibc, newer than provided.al2023's $MAX_GLIBC"
    fi

    # No SQLite or PostgreSQL: neither in what cargo resolves for this package as `sam build`
    # builds it (from its own directory), nor in the binary.
    tree=$(cd "$code_uri" && cargo tree -e normal --target "$triple" --prefix none -f '{p}')
    adapters=$(grep -E '^(rusqlite|libsqlite3-sys|notice_sqlite|tokio-postgres|postgres-protocol|notice_postgres) ' \
        <<<"$tree" | sort -u || true)
    [[ -z $adapters ]] || fail "$logical_id: the Lambda build links a SQL ledger it must not: $adapters"
    if grep -a -q -e 'SQLite format 3' -e 'SCRAM-SHA-256' "$bootstrap"; then
        fail "$logical_id: the bootstrap contains SQLite or PostgreSQL code"
    fi
    echo "    $arch ok · $bytes bytes ($(awk "BEGIN{printf \"%.1f\", $bytes/1048576}") MiB) · glibc ≤ $glibc · no SQLite/PostgreSQL"

    refuse=()
    case $binary in
        notice-sender) refuse=(--refuse-without NOTICE_KEY_SECRET_ARN --refusal-mentions NOTICE_KEY_SECRET) ;;
        # The intake: no kind, no start (it would enqueue jobs under a kind nobody chose).
        notice-intake) refuse=(--refuse-without NOTICE_INTAKE_KIND) ;;
        *) refuse=(--refuse-without NOTICE_TABLE) ;;
    esac
    qemu_arg=()
    ((${#qemu[@]})) && qemu_arg=(--qemu "${qemu[*]}")
    "$py" scripts/lambda_start_check.py start template.yaml "$logical_id" "$bootstrap" \
        "${qemu_arg[@]}" "${START_PARAMS[@]}" "${refuse[@]}" \
        || fail "$logical_id: the start check failed (above)"
    summary+=("$(printf '%-20s %-18s %9d bytes  glibc %-5s started' "$logical_id" "$binary" "$bytes" "$glibc")")
    checked=$((checked + 1))
done 3< <("$py" scripts/lambda_start_check.py functions template.yaml)
((checked > 0)) || fail "template.yaml declares no AWS::Serverless::Function"

step "deploy check passed ($arch)"
printf '  %s\n' "${summary[@]}"
echo "  sam build $(elapsed build_secs) · whole check $(elapsed SECONDS-started)"
