#!/usr/bin/env bash
# Make sure a Chromium is installed for tools/browser_check.py (Playwright drives the system's browser; nothing is
# downloaded from a browser vendor). On Debian/Ubuntu as root it installs the distribution's `chromium`;
# otherwise it says what to install. Idempotent.
set -euo pipefail
for name in chromium chromium-browser google-chrome; do
  if command -v "$name" >/dev/null 2>&1; then echo "==> browser: $(command -v "$name")"; exit 0; fi
done
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "==> installing Debian's chromium for the browser test (apt-get)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  command -v chromium >/dev/null && exit 0
fi
echo "error: the browser test needs Chromium: install it (Debian/Ubuntu: sudo apt-get install chromium) and run again" >&2
exit 1
