# Thin wrapper over CMake for the README's commands. Everything builds into
# build/ (binaries in build/bin/); the sanitizer and fuzz builds have their own
# directories so they never mix with it.
BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 15
CMAKE_GEN  := -G Ninja
JOBS       ?= $(shell nproc)
# Tests of the Go emulators alone (no kdp C code runs in them): the
# sanitizer builds skip them, the normal build runs them.
GO_ONLY_TESTS := ^(kubelet_emulator|kubelet_dra_emulator|apiserver_emulator)$$

.PHONY: all deps build test test-unit test-asan test-tsan asan-build tsan-build test-valgrind fuzz \
	fuzz-build format lint clean demo bench

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/build.ninja: CMakeLists.txt
	cmake -S . -B $(BUILD) $(CMAKE_GEN) -DKDP_WERROR=ON -DKDP_INTEROP=ON -DKDP_SANITIZE=OFF

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# Every test: lint (clang-format and clang-tidy, zero findings), the normal
# build (valgrind memcheck of an example plugin included), a short run of
# every fuzz target (their corpora are also replayed by ctest), then, side by
# side, the threaded tests under TSan and every test again under
# ASan+UBSan, whose ctest summary closes the output. The fuzz tree builds and fuzzes, and the TSan
# and ASan trees build, in the background (at a lower priority) while lint
# and the normal tests run:
# scripts/test-all.sh, which says what each step took.
test: build
	@scripts/test-all.sh

test-unit: build
	cd $(BUILD) && ctest --output-on-failure -L unit

asan-build: deps
	cmake -S . -B $(ASAN_BUILD) $(CMAKE_GEN) -DCMAKE_C_COMPILER=clang -DKDP_SANITIZE=ON \
	  -DKDP_WERROR=ON -DKDP_INTEROP=ON -DKDP_GO_PEERS_DIR=$(abspath $(BUILD))/go \
	  -DKDP_KUBELET_DIR=$(abspath $(BUILD))/kubelet-go -DKDP_APISERVER_DIR=$(abspath $(BUILD))/apiserver-go
	cmake --build $(ASAN_BUILD) -j $(JOBS)

test-asan: asan-build
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j 2 \
	    -E '$(GO_ONLY_TESTS)'

# The threaded code under ThreadSanitizer (clang; the demo is left out: its
# fixed waits are for people, not for TSan's slowdown): the unit tests (their
# failing-malloc cases skip: TSan's allocator stays), and the integration and
# robustness tests, whose plugins are then TSan builds (a race report fails
# the test).
tsan-build: deps
	cmake -S . -B $(TSAN_BUILD) $(CMAKE_GEN) -DCMAKE_C_COMPILER=clang -DKDP_SANITIZE=OFF \
	  -DCMAKE_C_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
	  -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread \
	  -DKDP_WERROR=ON -DKDP_INTEROP=ON -DKDP_ROBUSTNESS_SANITIZED=ON \
	  -DKDP_GO_PEERS_DIR=$(abspath $(BUILD))/go -DKDP_KUBELET_DIR=$(abspath $(BUILD))/kubelet-go \
	  -DKDP_APISERVER_DIR=$(abspath $(BUILD))/apiserver-go
	cmake --build $(TSAN_BUILD) -j $(JOBS)

test-tsan: tsan-build
	cd $(TSAN_BUILD) && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	  ctest --output-on-failure -j 2 -L 'unit|integration|robustness' \
	    -E 'kdpctl_demo|$(GO_ONLY_TESTS)'

# valgrind memcheck of kdp-example-gopher through a whole lifecycle (also
# part of the normal build's ctest run).
test-valgrind: build
	cd $(BUILD) && ctest --output-on-failure -R valgrind_

fuzz-build: deps
	cmake -S . -B $(FUZZ_BUILD) $(CMAKE_GEN) -DCMAKE_C_COMPILER=clang -DKDP_FUZZ=ON \
	  -DKDP_TESTS=OFF -DKDP_WERROR=ON
	cmake --build $(FUZZ_BUILD) -j $(JOBS)

# Runs each fuzz target for FUZZ_SECONDS on a scratch copy of its corpus.
fuzz: fuzz-build
	@scripts/run-fuzz.sh $(FUZZ_BUILD)/bin $(FUZZ_SECONDS)

# The README's first command: a narrated story with kdpctl kubelet and a plugin.
demo: build
	@scripts/demo.sh $(BUILD)/bin

# kdp side by side with the Go way; writes build/bench/ and prints a table.
bench: build
	@bench/run.sh $(BUILD)

# clang-format's check and clang-tidy (.clang-tidy) with zero findings.
lint: build
	@scripts/lint.sh $(BUILD)

format:
	clang-format -i include/*.h src/*/*.[ch] examples/*.[ch] tools/*/*.[ch] tests/unit/*.c \
	  tests/interop/*.c \
	  tests/plugin/*.c fuzz/*.c

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)
