#!/usr/bin/env bash
# Remove this workspace's own crates from a cargo target dir, keeping the dependencies.
#
#   scripts/prune-target.sh DIR
#
# .ci/run keeps its target dir under $TORCHNATIVE_HOME, so that a fresh clone does not compile
# the workspace's dependencies again. The workspace's crates are rebuilt in every fresh clone
# anyway (their sources are new files), and cargo keys their artifacts by the clone's path, so
# without this each clone would leave a full set behind. Every unit cargo built for a package
# named torchnative-* (library, tests, examples, binaries, build script) goes, in every profile
# and target directory; nothing of a dependency is touched.
set -euo pipefail
dir="${1:?usage: scripts/prune-target.sh DIR}"
[[ -d "$dir" ]] || exit 0
removed=0
while IFS= read -r -d '' fp; do
  unit="$(basename "$fp")"        # torchnative-<crate>-<16 hex digits>
  hash="${unit##*-}"
  [[ "$hash" =~ ^[0-9a-f]{16}$ ]] || continue
  profile_dir="$(dirname "$(dirname "$fp")")"
  rm -rf "$fp" "$profile_dir/build/$unit"
  find "$profile_dir/deps" "$profile_dir/examples" -maxdepth 1 -name "*-$hash*" -exec rm -rf {} + 2>/dev/null || true
  removed=$((removed + 1))
done < <(find "$dir" -mindepth 2 -maxdepth 5 -type d -path '*/.fingerprint/torchnative-*' -print0)
echo "prune-target: removed $removed units of the workspace's crates from $dir" >&2
