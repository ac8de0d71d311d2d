# ggufd on Debian 12. Build:  docker build -t ggufd .
# Run:   docker run -p 8080:8080 -v "$PWD/models:/models:ro" \
#            -e GGUFD_MODEL=tiny=/models/stories260K.gguf ggufd
# (no GGUFD_MODEL: ggufd serves its built-in demo model). Every setting is a GGUFD_* variable;
# see the README's Deployment section.
#
# The binary is portable: kernels pick their SIMD path (scalar, AVX2, AVX-512) at run time from
# the CPU they find, and nothing is built with -march=native, so one image runs on any x86-64.

# ---- build stage: the full toolchain from Debian's packages ----
FROM debian:12 AS build
WORKDIR /src

# The same Debian packages as a development machine (compilers, Boost, ICU, spdlog, prometheus-cpp,
# ...; the test libraries come along but tests are not built here).
COPY scripts/install-deps.sh scripts/
RUN bash scripts/install-deps.sh \
 && rm -rf /var/lib/apt/lists/*

# Only the sources the build reads, so a local build/ folder or .git never reach the context
# that CMake configures (a stray CMakeCache.txt from another path would stop the configure).
COPY CMakeLists.txt CMakePresets.json ./
COPY cmake/ cmake/
COPY config/ config/
COPY gguf/ gguf/
COPY engine/ engine/
COPY server/ server/
COPY tools/ tools/
COPY docker/runtime-packages.sh docker/healthcheck.sh docker/

# Only the daemon and the inspector ship. Debug sections are stripped (they would triple the
# size; symbols stay for readable backtraces). runtime-packages.sh lists the Debian packages whose
# libraries the binaries load, so the runtime stage installs exactly those.
RUN cmake --preset release -DGGUFD_BUILD_TESTS=OFF -DGGUFD_BUILD_BENCHMARKS=OFF \
 && cmake --build --preset release --target ggufd gguf-inspect \
 && mkdir -p /out/bin \
 && cp build/bin/ggufd build/bin/gguf-inspect /out/bin/ \
 && strip --strip-debug /out/bin/ggufd /out/bin/gguf-inspect \
 && install -m 0755 docker/healthcheck.sh /out/bin/ggufd-healthcheck \
 && bash docker/runtime-packages.sh /out/bin/ggufd /out/bin/gguf-inspect > /out/runtime-packages.txt \
 && cat /out/runtime-packages.txt

# ---- runtime stage: the binaries, their shared libraries, an unprivileged user ----
FROM debian:12-slim

COPY --from=build /out/runtime-packages.txt /tmp/runtime-packages.txt
RUN apt-get update \
 && xargs -r -a /tmp/runtime-packages.txt apt-get install -y --no-install-recommends \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages.txt \
 && groupadd --system --gid 10001 ggufd \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin ggufd \
 && mkdir -p /models

COPY --from=build /out/bin/ /usr/local/bin/
# Fail the image build, not the first start, if a shared library is missing.
RUN ! ldd /usr/local/bin/ggufd /usr/local/bin/gguf-inspect | grep "not found"

LABEL org.opencontainers.image.title="ggufd" \
      org.opencontainers.image.description="HTTP model-serving daemon for GGUF models on the CPU"

# Listen on every interface inside the container; publish the port to choose who can reach it.
ENV GGUFD_HOST=0.0.0.0 \
    GGUFD_PORT=8080
# Models are mounted here read-only, e.g. -v ./models:/models:ro and GGUFD_MODEL=name=/models/x.gguf
VOLUME ["/models"]
EXPOSE 8080

USER 10001:10001
WORKDIR /models

# /health answers 503 while models load, so the start period covers loading a large model.
HEALTHCHECK --interval=15s --timeout=5s --start-period=120s --retries=3 \
    CMD ["ggufd-healthcheck"]

ENTRYPOINT ["ggufd"]
