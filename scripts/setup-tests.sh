#!/usr/bin/env bash
# Install everything the test suite needs on a fresh machine: the package with its test
# extras (torch==2.13.0, the CPU build, pinned exactly because a range would pull the CUDA
# build; pytest; hypothesis; nbclient, nbformat and ipykernel for the notebook), a real LaTeX
# engine (the LaTeX tests compile every problem's document) and Graphviz (`adjoint graph`
# draws with its dot). Without them the suite skips what needs them, saying so;
# ADJOINT_REQUIRE_ALL=1 (set by .ci/run) makes those skips failures.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q -e '.[test]'
if ! command -v pdflatex >/dev/null 2>&1 || ! command -v pdftoppm >/dev/null 2>&1 \
   || ! command -v dot >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  as_root=""
  if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then as_root="sudo -E"; fi
  $as_root apt-get update -qq
  # adjoint latex needs only article, amsmath, amssymb and geometry (texlive-latex-base and its
  # dependency texlive-base; graphicx for the graph pictures is in it too); poppler-utils gives
  # pdftoppm/pdftotext for looking at the pages; graphviz gives dot, which `adjoint graph` runs.
  $as_root apt-get install -y -qq --no-install-recommends texlive-latex-base poppler-utils graphviz >/dev/null
fi
