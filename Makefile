# Thin wrapper over CMake for the README's commands. Everything builds into
# build/ (binaries in build/bin/); the sanitizer and fuzz builds have their own
# directories so they never mix with it.
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 20
CMAKE_GEN  := -G Ninja
JOBS       ?= $(shell nproc)

.PHONY: all deps build test test-unit test-asan fuzz fuzz-build format clean demo bench

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/build.ninja: CMakeLists.txt
	cmake -S . -B $(BUILD) $(CMAKE_GEN) -DKDP_WERROR=ON -DKDP_INTEROP=ON -DKDP_SANITIZE=OFF

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# Every test: the normal build, a short run of every fuzz target (their
# corpora are also replayed by ctest), then every test again under
# ASan+UBSan, whose ctest summary closes the output.
test: build
	cd $(BUILD) && ctest --output-on-failure -j 2
	$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$(FUZZ_SECONDS)
	$(MAKE) --no-print-directory test-asan

test-unit: build
	cd $(BUILD) && ctest --output-on-failure -L unit

test-asan: deps
	cmake -S . -B $(ASAN_BUILD) $(CMAKE_GEN) -DCMAKE_C_COMPILER=clang -DKDP_SANITIZE=ON \
	  -DKDP_WERROR=ON -DKDP_INTEROP=ON -DKDP_GO_PEERS_DIR=$(abspath $(BUILD))/go \
	  -DKDP_KUBELET_DIR=$(abspath $(BUILD))/kubelet-go
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j 2

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

format:
	clang-format -i include/*.h src/*.[ch] examples/*.[ch] tests/unit/*.c tests/interop/*.c \
	  tests/plugin/*.c fuzz/*.c

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
