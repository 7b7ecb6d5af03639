# Front door for the CMake build. `make` builds the release tree, `make test`
# runs every suite in a release build and again under ASan+UBSan, the C suites
# and the concurrency server suite under ThreadSanitizer, the module suite in
# Debian's redis-server, the node-redis suite, then the fuzz targets for a
# bounded time.
#
# `make test` runs the suites side by side, TEST_JOBS at a time (a make -j of
# its own; one more than the cores, as the server suites keep a core only
# about 70% busy: they wait on servers, Sentinel and fsyncs), each suite's
# output printed in one piece when it ends (--output-sync)
# and every suite run even when one fails (-k); make's last lines name the
# suites that failed. The server suites run as SHARDS groups of files each
# (tests/server/test_*.py, every SHARDS-th file), small enough that no
# group ends the run alone.
BUILD       ?= build
ASAN_BUILD  ?= build-asan
TSAN_BUILD  ?= build-tsan
FUZZ_BUILD  ?= build-fuzz
JOBS        ?= $(shell nproc)
TEST_JOBS   ?= $(shell echo $$(( $$(nproc) + 1 )))
# Seconds each fuzz target runs in `make test` (the 22 targets take both
# cores for FUZZ_SECONDS x 22 / 2); `make fuzz FUZZ_SECONDS=600` for a long run.
FUZZ_SECONDS ?= 12
SHARDS      ?= 8

PY          := /usr/bin/python3 -m pytest -q -p no:cacheprovider
SHARD_IDS   := $(shell seq 1 $(SHARDS))
# The files of server suite shard N (1..SHARDS).
server_shard = $$(ls tests/server/test_*.py | awk 'NR % $(SHARDS) == $(1) % $(SHARDS)')

.PHONY: deb all deps test test-all test-release test-asan test-tsan test-server test-module \
	test-node fuzz bench run clean install build-asan build-tsan suite-console suite-console-asan

all:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

deps:
	./scripts/install-deps

test:
	@$(MAKE) --no-print-directory -k -j $(TEST_JOBS) --output-sync=target test-all

# The C suites first (the ThreadSanitizer ones, then the release and ASan
# ones): their longest tests run for minutes on one core each, and started
# after the server suites they were left running alone at the end. Then
# the module, console and CLI suites, which wait more than they compute,
# and the server suites in SHARDS small groups each, which fill the cores
# to the end. make starts prerequisites in this order; the fuzz targets
# fill both cores and can go last.
test-all: test-tsan test-release test-asan test-server test-node fuzz

test-release: all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

build-asan:
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DBLOOMERY_SANITIZE=ON -DBLOOMERY_BENCH=OFF >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)

test-asan: build-asan
	cd $(ASAN_BUILD) && BLOOMERY_QUICK=1 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
		ctest --output-on-failure -j $(JOBS)

# ThreadSanitizer: the C suites' tests that start threads (they race adders
# and readers on one filter; tests/testutil.h marks them, and the other tests,
# which TSan has nothing to check in, run in the release and ASan builds) and
# the server's concurrency suite; any report fails the run (exit status 66). The server runs without TSan's deadlock detector, which
# tracks at most 64 held locks per thread and aborts when FLUSHALL or a
# snapshot holds every keyspace stripe.
build-tsan:
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DBLOOMERY_TSAN=ON -DBLOOMERY_BENCH=OFF >/dev/null
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target threaded_tests bloomeryd

test-tsan: suite-tsan-c suite-tsan-concurrency

suite-tsan-c: build-tsan
	cd $(TSAN_BUILD) && BLOOMERY_QUICK=1 TSAN_OPTIONS=second_deadlock_stack=1 \
		ctest --output-on-failure -j $(JOBS) -L threads

suite-tsan-concurrency: build-tsan
	BLOOMERY_QUICK=1 BLOOMERYD=$(CURDIR)/$(TSAN_BUILD)/bloomeryd \
		TSAN_OPTIONS=detect_deadlocks=0 \
		$(PY) tests/server/test_concurrency.py

# The server and CLI suites run through real clients against the release
# programs and again against the sanitizer build; the module suite runs
# bloomery.so in Debian's redis-server next to bloomeryd, release and
# sanitizer builds (the sanitizer runtime preloaded into Redis).
test-server: test-module suite-module-asan suite-console suite-console-asan suite-cli suite-cli-asan \
	$(foreach n,$(SHARD_IDS),suite-server-asan-$(n) suite-server-$(n))

suite-server-%: all
	BLOOMERYD=$(CURDIR)/$(BUILD)/bloomeryd $(PY) $(call server_shard,$*)

suite-server-asan-%: build-asan
	BLOOMERY_QUICK=1 BLOOMERYD=$(CURDIR)/$(ASAN_BUILD)/bloomeryd $(PY) $(call server_shard,$*)

suite-module-asan: build-asan
	REDIS_PRELOAD=$$(gcc -print-file-name=libasan.so) \
		BLOOMERY_MODULE=$(CURDIR)/$(ASAN_BUILD)/bloomery.so BLOOMERYD=$(CURDIR)/$(ASAN_BUILD)/bloomeryd \
		$(PY) tests/module

suite-cli: all
	BLOOMERY_CLI=$(CURDIR)/$(BUILD)/bloomery BLOOMERYD=$(CURDIR)/$(BUILD)/bloomeryd \
		$(PY) tests/cli

suite-cli-asan: build-asan
	REDIS_PRELOAD=$$(gcc -print-file-name=libasan.so) \
		BLOOMERY_QUICK=1 BLOOMERY_CLI=$(CURDIR)/$(ASAN_BUILD)/bloomery BLOOMERYD=$(CURDIR)/$(ASAN_BUILD)/bloomeryd \
		$(PY) tests/cli

# bloomery console over real deployments: bloomeryd, Debian's redis-server
# with bloomery.so in a Redis Cluster, redis-sentinel.
suite-console: all
	BLOOMERY_CLI=$(CURDIR)/$(BUILD)/bloomery BLOOMERYD=$(CURDIR)/$(BUILD)/bloomeryd \
		BLOOMERY_MODULE=$(CURDIR)/$(BUILD)/bloomery.so $(PY) tests/console

suite-console-asan: build-asan
	REDIS_PRELOAD=$$(gcc -print-file-name=libasan.so) \
		BLOOMERY_QUICK=1 BLOOMERY_CLI=$(CURDIR)/$(ASAN_BUILD)/bloomery \
		BLOOMERYD=$(CURDIR)/$(ASAN_BUILD)/bloomeryd BLOOMERY_MODULE=$(CURDIR)/$(ASAN_BUILD)/bloomery.so \
		$(PY) tests/console

test-module: all
	BLOOMERY_MODULE=$(CURDIR)/$(BUILD)/bloomery.so BLOOMERYD=$(CURDIR)/$(BUILD)/bloomeryd \
		$(PY) tests/module

# Through node-redis and @redis/bloom (scripts/install-deps installs them).
test-node: all
	cd tests/node && BLOOMERYD=$(CURDIR)/$(BUILD)/bloomeryd node --test

fuzz:
	./fuzz/run $(FUZZ_BUILD) $(FUZZ_SECONDS)

bench: all
	./bench/run

run: all
	./scripts/run-server

# PREFIX=/usr puts the configuration in /etc (GNUInstallDirs); DESTDIR
# stages the files under another root.
install: all
	cmake --install $(BUILD) $(if $(PREFIX),--prefix $(PREFIX))

# The Debian package of the committed tree, into build-deb/.
deb:
	./scripts/build-deb build-deb

clean:
	rm -rf build-deb $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)
