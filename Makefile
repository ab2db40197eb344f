# Top-level build of the tile compile service.
#
#   make                      build every library and command into build/
#   make test                 build and run every test (unit, check table,
#                             interpreter, fuzz-corpus replay; GPU tests skip
#                             with a message when no GPU is present)
#   make SANITIZE=address,undefined test
#                             the same under sanitizers (separate object dir)
#   make install PREFIX=/usr/local DESTDIR=
#   make fuzz                 libFuzzer targets (clang) into build/fuzz/
#   make WERROR=1             warnings are errors (CI)
#
# Layout: proto/ compiler/ cache/ server/ client/ each build a static
# library from their *.c files, except the files named in *_MAIN below,
# which are commands.  Binaries go to build/bin, libraries to build/lib.

PREFIX   ?= /usr/local
DESTDIR  ?=
CC       ?= cc
SANITIZE ?=
WERROR   ?=
OPT      ?= -O2

# A sanitizer build lives in its own tree so the two never mix.
B        := build$(if $(SANITIZE),/san)
OBJ      := $(B)/obj
CFLAGS_BASE := -std=c11 -D_DEFAULT_SOURCE -D_POSIX_C_SOURCE=200809L -Wall -Wextra \
               -Wno-unused-parameter -g $(OPT) -fPIC -MMD -MP
CFLAGS_BASE += $(if $(WERROR),-Werror)
CFLAGS_BASE += $(if $(SANITIZE),-fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
LDFLAGS_BASE := $(if $(SANITIZE),-fsanitize=$(SANITIZE))
ALL_CFLAGS := $(CFLAGS_BASE) -Iproto -Icompiler $(CFLAGS)
LIBS_COMPILER := -ljansson -lcrypto -ldl -lm -lpthread
LIBS_CACHE    := -lsqlite3 -lcrypto
LIBS_SERVER   := -lmicrohttpd -lpthread

# --- sources --------------------------------------------------------------
PROTO_SRC    := $(wildcard proto/*.c)
COMPILER_MAIN := compiler/tlc.c
COMPILER_SRC := $(filter-out $(COMPILER_MAIN),$(wildcard compiler/*.c))
CACHE_SRC    := $(wildcard cache/*.c)
SERVER_MAIN  := server/tlserverd.c
SERVER_SRC   := $(filter-out $(SERVER_MAIN),$(wildcard server/*.c))

objs = $(patsubst %.c,$(OBJ)/%.o,$(1))

LIB_PROTO    := $(B)/lib/libtlproto.a
LIB_COMPILER := $(B)/lib/libtlcompiler.a
LIB_CACHE    := $(B)/lib/libtlcache.a
LIB_SERVER   := $(B)/lib/libtlserver.a
TLC          := $(B)/bin/tlc
TLSERVERD    := $(B)/bin/tlserverd

# Link order: dependents before what they depend on (proto last).
LIBS_ALL := $(if $(SERVER_SRC),$(LIB_SERVER)) $(LIB_COMPILER) $(if $(CACHE_SRC),$(LIB_CACHE)) $(LIB_PROTO)
BINS     := $(TLC) $(TLSERVERD)

.PHONY: all test install clean fuzz bench golden-update
all: $(LIBS_ALL) $(BINS)

# Rebuild everything when the flags change.
FLAGS_STAMP := $(OBJ)/.flags
$(shell mkdir -p $(OBJ) && echo '$(ALL_CFLAGS) $(LDFLAGS_BASE)' | cmp -s - $(FLAGS_STAMP) || echo '$(ALL_CFLAGS) $(LDFLAGS_BASE)' > $(FLAGS_STAMP))

$(OBJ)/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(LIB_PROTO): $(call objs,$(PROTO_SRC))
$(LIB_COMPILER): $(call objs,$(COMPILER_SRC))
$(LIB_CACHE): $(call objs,$(CACHE_SRC))
$(LIB_SERVER): $(call objs,$(SERVER_SRC))
$(B)/lib/%.a:
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# tlc launches kernels (run --device) through libtlclient's launcher
# (client/launch.c and meta.c, the only objects taken from libtlclient.a:
# they need neither curl nor the cache).
$(TLC): $(call objs,$(COMPILER_MAIN)) $(B)/lib/libtlclient.a $(LIB_COMPILER) $(LIB_PROTO)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_BASE) $(LDFLAGS) -o $@ $^ $(LIBS_COMPILER)

$(TLSERVERD): $(call objs,$(SERVER_MAIN)) $(LIB_SERVER) $(LIB_COMPILER) $(LIB_CACHE) $(LIB_PROTO)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_BASE) $(LDFLAGS) -o $@ $^ $(LIBS_SERVER) $(LIBS_COMPILER) $(LIBS_CACHE)

# --- the client (libtlclient, tlclient, the example application) -----------
# libtlclient.a and libtlclient.so (soname libtlclient.so.0; only the public
# API of client/include/tl/tlclient.h is exported, see client/tlclient.map)
# hold client/*.c with what they use of libtlcompiler, libtlcache and
# libtlproto.  tlclient links the static library; tl-example-app the shared
# one (rpath $ORIGIN/../lib), as an application would.
CLIENT_MAIN   := client/tlclient.c
CLIENT_SRC    := $(filter-out $(CLIENT_MAIN),$(wildcard client/*.c))
APP_SRC       := $(wildcard examples/app/*.c)
LIB_CLIENT    := $(B)/lib/libtlclient.a
LIB_CLIENT_SO := $(B)/lib/libtlclient.so
TLCLIENT      := $(B)/bin/tlclient
EXAMPLE_APP   := $(B)/bin/tl-example-app
TLCLIENT_PC   := $(B)/lib/pkgconfig/tlclient.pc
LIBS_CLIENT   := -lcurl -ljansson -lsqlite3 -lcrypto -ldl -lm -lpthread
BINS += $(TLCLIENT)

all: $(LIB_CLIENT) $(LIB_CLIENT_SO) $(TLCLIENT_PC) $(TLCLIENT) $(EXAMPLE_APP)

$(OBJ)/client/%.o $(OBJ)/examples/app/%.o $(OBJ)/tests/unit/test_client%.o: ALL_CFLAGS += -Iclient/include
$(LIB_CLIENT): $(call objs,$(CLIENT_SRC))

$(LIB_CLIENT_SO): $(call objs,$(CLIENT_SRC)) $(LIB_COMPILER) $(LIB_CACHE) $(LIB_PROTO) client/tlclient.map
	@mkdir -p $(dir $@)
	$(CC) -shared $(LDFLAGS_BASE) $(LDFLAGS) -Wl,-soname,libtlclient.so.0 -Wl,--version-script=client/tlclient.map \
	  -o $@.0 $(call objs,$(CLIENT_SRC)) $(LIB_COMPILER) $(LIB_CACHE) $(LIB_PROTO) $(LIBS_CLIENT)
	ln -sf libtlclient.so.0 $@

$(TLCLIENT): $(call objs,$(CLIENT_MAIN)) $(LIB_CLIENT) $(LIB_COMPILER) $(LIB_CACHE) $(LIB_PROTO)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_BASE) $(LDFLAGS) -o $@ $^ $(LIBS_CLIENT)

# The example embeds examples/gemm.json (.incbin in examples/app/gemm_program.c).
$(OBJ)/examples/app/gemm_program.o: examples/gemm.json
$(EXAMPLE_APP): $(call objs,$(APP_SRC)) $(LIB_CLIENT_SO)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_BASE) $(LDFLAGS) -o $@ $(call objs,$(APP_SRC)) -L$(B)/lib -ltlclient -lm \
	  -Wl,-rpath,'$$ORIGIN/../lib'

$(TLCLIENT_PC): client/tlclient.pc.in Makefile
	@mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|0.1.0|g' -e 's|@LIBS@|$(LIBS_CLIENT)|g' $< >$@

# test_client*.c also link libtlclient (a shorter stem wins over $(B)/tests/%).
$(B)/tests/test_client%: $(OBJ)/tests/unit/test_client%.o $(LIB_CLIENT) $(LIBS_ALL)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_BASE) $(LDFLAGS) -o $@ $< $(LIB_CLIENT) $(LIBS_ALL) -lcmocka $(LIBS_CLIENT)

.PHONY: install-client
install: install-client
install-client: all
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include/tl
	install -m 644 $(LIB_CLIENT) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(LIB_CLIENT_SO).0 $(DESTDIR)$(PREFIX)/lib/
	ln -sf libtlclient.so.0 $(DESTDIR)$(PREFIX)/lib/libtlclient.so
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|0.1.0|g' -e 's|@LIBS@|$(LIBS_CLIENT)|g' \
	  client/tlclient.pc.in >$(DESTDIR)$(PREFIX)/lib/pkgconfig/tlclient.pc
	install -m 644 client/include/tl/tlclient.h proto/tl_status.h proto/tl_error.h $(DESTDIR)$(PREFIX)/include/tl/

# --- tests ----------------------------------------------------------------
# Every tests/unit/test_*.c is a cmocka program linked with all libraries.
UNIT_SRC  := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(B)/tests/%,$(UNIT_SRC))
FUZZ_REPLAY := $(B)/tests/fuzz_replay

$(B)/tests/%: $(OBJ)/tests/unit/%.o $(LIBS_ALL)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_BASE) $(LDFLAGS) -o $@ $< $(LIBS_ALL) -lcmocka $(LIBS_SERVER) -lcurl $(LIBS_COMPILER) $(LIBS_CACHE) -lpthread

$(FUZZ_REPLAY): $(OBJ)/tests/fuzz/fuzz_check.o $(OBJ)/tests/fuzz/replay_main.o $(LIB_COMPILER) $(LIB_PROTO)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_BASE) $(LDFLAGS) -o $@ $^ $(LIBS_COMPILER)

test: all $(UNIT_BINS) $(FUZZ_REPLAY)
	@TL_BUILD=$(B) sh tests/run.sh $(UNIT_BINS)

# Rewrites tests/golden/NAME.cu from the current emitter (tests/unit/test_golden.c);
# review the result with `git diff tests/golden` before committing it.
golden-update: $(B)/tests/test_golden
	TL_GOLDEN_UPDATE=1 TL_SRCDIR=$(CURDIR) $(B)/tests/test_golden

# --- fuzzing (clang + libFuzzer) -----------------------------------------
FUZZ_CC ?= clang
fuzz: $(B)/fuzz/fuzz_check
$(B)/fuzz/fuzz_check: tests/fuzz/fuzz_check.c $(PROTO_SRC) $(COMPILER_SRC)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -std=c11 -D_DEFAULT_SOURCE -D_POSIX_C_SOURCE=200809L -g -O1 \
	  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Iproto -Icompiler -o $@ $^ \
	  $(LIBS_COMPILER)

# --- install --------------------------------------------------------------
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib
	install -m 755 $(BINS) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(LIBS_ALL) $(DESTDIR)$(PREFIX)/lib/

clean:
	rm -rf build

-include $(shell find $(B) -name '*.d' 2>/dev/null)
