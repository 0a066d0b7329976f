# shellcheck shell=bash
# Sourced by the bench scripts: `WORK=$(work_dir NAME)` gives the folder a run works in. Without WORK in the
# environment it is a new folder from mktemp (/tmp/NAME.XXXXXX): a script never deletes a fixed path it did not
# make. WORK=DIR is honoured as before: that folder, emptied first (rm -rf), since the caller named it as scratch.
work_dir() {
  if [ -n "${WORK:-}" ]; then
    rm -rf "$WORK" && mkdir -p "$WORK" && echo "$WORK"
  else
    mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX"
  fi
}
