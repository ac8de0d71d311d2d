# Multi-stage build of ggufd on Debian 12. Kernels pick their SIMD path at run time, so the image
# runs on any x86-64. (The runtime stage gains the daemon, a non-root user, HEALTHCHECK and the
# model volume when the server lands: issue 8.)
FROM debian:12 AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/
RUN bash scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake --preset release -DGGUFD_BUILD_TESTS=OFF -DGGUFD_BUILD_BENCHMARKS=OFF \
 && cmake --build --preset release

FROM debian:12-slim
RUN apt-get update && apt-get install -y --no-install-recommends libspdlog1.10 libfmt9 \
    libboost-program-options1.81.0 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 ggufd
COPY --from=build /src/build/bin/ /usr/local/bin/
USER ggufd
ENTRYPOINT ["gguf-inspect"]
