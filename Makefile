# Front door for the CMake build. `make` builds the release tree, `make test`
# runs every suite in a release build and again under ASan+UBSan, then the
# fuzz targets for a bounded time.
BUILD       ?= build
ASAN_BUILD  ?= build-asan
FUZZ_BUILD  ?= build-fuzz
JOBS        ?= $(shell nproc)
FUZZ_SECONDS ?= 30

.PHONY: all deps test test-release test-asan fuzz bench run clean install

all:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

deps:
	./scripts/install-deps

test: test-release test-asan fuzz

test-release: all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan:
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DBLOOMERY_SANITIZE=ON -DBLOOMERY_BENCH=OFF >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && BLOOMERY_QUICK=1 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
		ctest --output-on-failure -j $(JOBS)

fuzz:
	./fuzz/run $(FUZZ_BUILD) $(FUZZ_SECONDS)

bench: all
	./bench/run

run: all
	./$(BUILD)/bloomery calc 1000000000 0.01

install: all
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
