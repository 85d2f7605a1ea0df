# emq in a container: the six binaries on a small Debian runtime, as a
# non-root user. Build: docker build -t emq .
#
#   docker run --rm -p 47290:47290 -p 47291:47291 -v emq-data:/var/lib/emq emq
#       the router (the default command); its journal in the volume
#   docker run --rm emq emq-jobmanager --broker tcp://ROUTER:47290
#       a job manager (Python jobs: build FROM emq with your code on PYTHONPATH)
#
# Stage 1 builds with the Rust toolchain, g++ (libzmq is built from source
# by the zmq crate) and libsodium-dev (linked statically, for CURVE).
# Stage 2 holds only the stripped binaries, python3 (for Python jobs) and
# a user: the binaries need nothing but glibc, libstdc++ and libgcc, which
# debian:bookworm-slim has (scripts/build-wheel.sh checks that they need
# nothing else).

FROM rust:1-bookworm AS build
# Debian stable's packages, unpinned: exact versions vanish from the
# archive with each point release and would break the build.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends g++ pkg-config libsodium-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --locked \
        -p emq-router -p emq-jobmanager -p emq-sender -p emq-cli -p emq-receiver -p emq-pubsub --bins \
    && mkdir /out \
    && for b in emq-router emq-jobmanager emq-sender emq-cli emq-receiver emq-pubsub; do \
           strip -o "/out/$b" "target/release/$b"; \
       done

FROM debian:bookworm-slim
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --home-dir /var/lib/emq --create-home \
        --shell /usr/sbin/nologin emq
COPY --from=build /out/ /usr/local/bin/
COPY LICENSE CHANGELOG.md /usr/share/doc/emq/
# The router listens on every interface inside the container (the admin
# socket stays on loopback: `docker exec CONTAINER emq-cli status`); its
# journal goes to the data volume.
ENV EMQ_DATA_DIR=/var/lib/emq \
    EVENTMQ_FRONTEND_ADDR=tcp://0.0.0.0:47291 \
    EVENTMQ_BACKEND_ADDR=tcp://0.0.0.0:47290
USER 10001:10001
WORKDIR /var/lib/emq
VOLUME ["/var/lib/emq"]
EXPOSE 47290 47291
# SIGTERM: the router drains (DRAIN_TIMEOUT, 10 s) and the job manager
# finishes its jobs (KILL_GRACE_PERIOD, 30 s): give `docker stop -t 40`.
STOPSIGNAL SIGTERM
CMD ["emq-router"]
