#!/usr/bin/env bash
# Make a release: the version of labhelpers that every notebook's setup cell installs on Colab, and the version of
# the notebooks its Colab badge opens. The release name lives in one place, src/labhelpers/_release.py.
#
#   bash tools/release.sh v0.2.0          # set, test, commit, tag, build dist/
#   git push origin main v0.2.0           # then publish: Colab installs from the pushed tag
#
# Steps: refuse a dirty tree; write the name into _release.py and the version into pyproject.toml and
# labhelpers/__init__.py; rewrite every notebook's setup cell and badge (tools/sync_setup_cells.py); run the whole
# test suite; commit; make an annotated tag; build the wheel into dist/ (attach it to the release if
# you publish one; the setup cell installs from the tag with pip, which needs no attachment).
set -euo pipefail
cd "$(dirname "$0")/.."
TAG=${1:?usage: bash tools/release.sh vMAJOR.MINOR.PATCH}
[[ $TAG =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "error: a release is named vMAJOR.MINOR.PATCH, got $TAG" >&2; exit 1; }
VERSION=${TAG#v}
[ -z "$(git status --porcelain)" ] || { echo "error: commit or discard your changes first (git status)" >&2; exit 1; }
! git rev-parse -q --verify "refs/tags/$TAG" >/dev/null || { echo "error: tag $TAG exists already" >&2; exit 1; }
sed -i "s/^RELEASE = \".*\"/RELEASE = \"$TAG\"/" src/labhelpers/_release.py
sed -i "s/^version = \".*\"/version = \"$VERSION\"/" pyproject.toml
sed -i "s/^__version__ = \".*\"/__version__ = \"$VERSION\"/" src/labhelpers/__init__.py
bash tools/setup_env.sh
.venv/bin/python tools/sync_setup_cells.py
bash tools/run_tests.sh
git commit -qam "Release $TAG"
git tag -a "$TAG" -m "gpu-course $TAG"
rm -rf dist && .venv/bin/python -m pip wheel -q --no-deps -w dist .
echo "==> released $TAG (dist/: $(ls dist | tr '\n' ' ')). Publish with: git push origin main $TAG"
