#!/usr/bin/env bash
# install_wheels: the wheels the GPU image lacks (.whl/, from scripts/device_wheels.sh) into /tmp/site, once per set
# of wheels on a machine. Two scripts of one device call, side by side (bench/learning_gpu.sh beside
# bench/chain_gpu.sh) or one after the other, share the install under a lock: neither rewrites /tmp/site under the
# other's running Python, and the second spends nothing (~15 s each time before).
#   . bench/site_wheels.sh && install_wheels [PYTHON]      (pip's status; 0 without .whl/)
install_wheels() {
  local py=${1:-python3} stamp
  ls .whl/*.whl > /dev/null 2>&1 || return 0
  mkdir -p /tmp/site
  stamp=$(stat -c '%n %s' .whl/*.whl | sha256sum | cut -c1-16)
  (
    command -v flock > /dev/null && flock 9
    [ "$(cat /tmp/site/.wheels 2>/dev/null)" = "$stamp" ] && exit 0
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl &&
      echo "$stamp" > /tmp/site/.wheels
  ) 9> /tmp/site.lock
}
