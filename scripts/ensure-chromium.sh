#!/usr/bin/env bash
# The dashboard tests drive Debian's headless Chromium through its chromedriver (never a
# downloaded browser). Install both from Debian when either is missing; a no-op otherwise.
set -euo pipefail

if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
echo "ensure-chromium: installing Debian chromium + chromium-driver" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver
