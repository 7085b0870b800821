# The two commands a newcomer needs: `make demo` and `make test`. `make bench` measures against baselines.
SWIFT ?= swift
SWIFT_BUILD_FLAGS ?=

.PHONY: bootstrap build pam pam-module test deb package-test demo bench soak fuzz docs clean install uninstall

# The system packages (scripts/bootstrap), then the Swift packages (scripts/resolve-dependencies, which says what to
# do when their hosts cannot be reached).
bootstrap:
	@scripts/bootstrap
	@SWIFT="$(SWIFT)" scripts/resolve-dependencies

build: bootstrap
	$(SWIFT) build $(SWIFT_BUILD_FLAGS)

# pam_localauth.so, the login keychain's PAM module (C: it is loaded into login, sshd and display managers and
# brings only libc and libpam into them), and the test driver that runs PAM stacks with it (PAMModule/).
PAM_CFLAGS ?= -O2 -Wall -Wextra -Werror
pam: bootstrap pam-module
	$(CC) $(PAM_CFLAGS) -O0 -g -rdynamic -o .build/pam/pam-session-driver PAMModule/pam-session-driver.c -lpam

# The module alone (the Debian package's build, into a folder of its own; no bootstrap). Hardened as Debian builds C:
# dpkg-buildflags.
PAM_BUILD_DIR ?= .build/pam
pam-module:
	mkdir -p $(PAM_BUILD_DIR)
	$(CC) $(PAM_CFLAGS) $(shell dpkg-buildflags --get CFLAGS 2>/dev/null) $(shell dpkg-buildflags --get CPPFLAGS 2>/dev/null) \
		-shared -fPIC -fvisibility=hidden -o $(PAM_BUILD_DIR)/pam_localauth.so PAMModule/pam_localauth.c \
		$(shell dpkg-buildflags --get LDFLAGS 2>/dev/null) -lpam

# The tree's formatting first (.swift-format: `swift format -i -r Sources Tests Benchmarks Examples Fuzz Package.swift`
# fixes what it reports, but documentation comments on public declarations), then the import and architecture checks,
# and after the build what an installation ships beside the binaries (scripts/check-installables: the man pages).
# Every test suite, against the real OpenSSL, SQLite, PAM (pam_matrix), libfprint (virtual reader) and a TPM
# (swtpm), in five passes over one build (scripts/run-tests): embedded, then the client-facing suites again through
# a localauthd each world starts (LA_TEST_MODE=daemon), then the keychain, SecKey, rights and examples suites on the
# TPM enclave backend, then the LAContext and rights suites with a real fprintd owning the reader, embedded and
# through localauthd. Then the public modules' documentation builds with no DocC warning (`make docs`).
# The passes run one after the other: they would share the two cores, and timing-bounded tests
# (prompts cancelled within 5 s) need them.
test: bootstrap pam
	$(SWIFT) format lint --strict --recursive Sources Tests Benchmarks Examples Fuzz Package.swift
	scripts/check-imports
	scripts/check-architecture
	$(SWIFT) build --build-tests $(SWIFT_BUILD_FLAGS)
	scripts/check-installables
	SWIFT="$(SWIFT)" SWIFT_BUILD_FLAGS="$(SWIFT_BUILD_FLAGS)" scripts/run-tests embedded
	SWIFT="$(SWIFT)" SWIFT_BUILD_FLAGS="$(SWIFT_BUILD_FLAGS)" scripts/run-tests daemon
	SWIFT="$(SWIFT)" SWIFT_BUILD_FLAGS="$(SWIFT_BUILD_FLAGS)" scripts/run-tests tpm
	SWIFT="$(SWIFT)" SWIFT_BUILD_FLAGS="$(SWIFT_BUILD_FLAGS)" scripts/run-tests fprintd
	SWIFT="$(SWIFT)" SWIFT_BUILD_FLAGS="$(SWIFT_BUILD_FLAGS)" scripts/run-tests fprintd-daemon
	$(MAKE) --no-print-directory docs

# The ChallengeSigning example end to end: libfprint's virtual reader, a throwaway store, HTTP on loopback.
# `lactl demo` (the building blocks one by one) stays available: `swift run lactl demo`.
demo: bootstrap
	$(SWIFT) build $(SWIFT_BUILD_FLAGS) --product ChallengeSigning
	$(SWIFT) run $(SWIFT_BUILD_FLAGS) --skip-build ChallengeSigning demo

bench: bootstrap pam
	$(SWIFT) build -c release $(SWIFT_BUILD_FLAGS) --product la-bench
	$(SWIFT) build -c release $(SWIFT_BUILD_FLAGS) --product localauthd
	$(SWIFT) build -c release $(SWIFT_BUILD_FLAGS) --product lactl
	$(SWIFT) run -c release --skip-build $(SWIFT_BUILD_FLAGS) la-bench

# localauthd for ten minutes under 16 client processes (`la-bench soak`; LA_SOAK_MINUTES, LA_SOAK_CLIENTS): a line
# per minute, then the daemon's memory over the run and the errors. Not part of `make test` or `make bench`.
soak: bootstrap
	$(SWIFT) build -c release $(SWIFT_BUILD_FLAGS) --product la-bench
	$(SWIFT) build -c release $(SWIFT_BUILD_FLAGS) --product localauthd
	$(SWIFT) run -c release --skip-build $(SWIFT_BUILD_FLAGS) la-bench soak

# libFuzzer for FUZZ_SECONDS each (default 60): the SSH agent's message parser, localauthd's frames and
# messages, the lane's frame reader on a socket, the app registry's file parser, then FIDO2's CBOR decoder and CTAPHID
# assembler, seeded from Fuzz/*/Corpus and Fuzz/FIDO/*Corpus.
FUZZ_SECONDS ?= 60
fuzz: bootstrap
	$(SWIFT) build --scratch-path .build-fuzz --product message-fuzz -Xswiftc -sanitize=fuzzer -Xswiftc -DFUZZING
	rm -rf .build-fuzz/corpus-agent .build-fuzz/corpus-protocol .build-fuzz/corpus-lane .build-fuzz/corpus-registry \
		.build-fuzz/corpus-cbor .build-fuzz/corpus-ctaphid .build-fuzz/corpus-u2f
	mkdir -p .build-fuzz/corpus-agent .build-fuzz/corpus-protocol .build-fuzz/corpus-lane .build-fuzz/corpus-registry \
		.build-fuzz/corpus-cbor .build-fuzz/corpus-ctaphid .build-fuzz/corpus-u2f
	cp Fuzz/AgentMessage/Corpus/* .build-fuzz/corpus-agent/
	cp Fuzz/ProtocolFrame/Corpus/* .build-fuzz/corpus-protocol/
	cp Fuzz/ProtocolFrame/Corpus/* .build-fuzz/corpus-lane/
	cp Fuzz/AppRegistration/Corpus/* .build-fuzz/corpus-registry/
	cp Fuzz/FIDO/CBORCorpus/* .build-fuzz/corpus-cbor/
	cp Fuzz/FIDO/CTAPHIDCorpus/* .build-fuzz/corpus-ctaphid/
	cp Fuzz/FIDO/U2FCorpus/* .build-fuzz/corpus-u2f/
	FUZZ_TARGET=agent .build-fuzz/debug/message-fuzz -max_total_time=$(FUZZ_SECONDS) .build-fuzz/corpus-agent
	FUZZ_TARGET=protocol .build-fuzz/debug/message-fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=4096 .build-fuzz/corpus-protocol
	FUZZ_TARGET=lane .build-fuzz/debug/message-fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=8192 .build-fuzz/corpus-lane
	FUZZ_TARGET=registry .build-fuzz/debug/message-fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=8192 .build-fuzz/corpus-registry
	FUZZ_TARGET=cbor .build-fuzz/debug/message-fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=8192 .build-fuzz/corpus-cbor
	FUZZ_TARGET=ctaphid .build-fuzz/debug/message-fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=16384 .build-fuzz/corpus-ctaphid
	FUZZ_TARGET=u2f .build-fuzz/debug/message-fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=4096 .build-fuzz/corpus-u2f

# The public modules' documentation (their DocC catalogs and doc comments) as static sites in .build/docs/<Module>,
# through swift-docc-plugin; docc warns about every link it cannot resolve.
DOC_TARGETS = LocalAuthentication KeychainServices SwiftKeychain KeyAttestation LocalAuthenticationCombine
docs: bootstrap
	mkdir -p .build/docs
	for target in $(DOC_TARGETS); do \
		rm -rf .build/docs/$$target; \
		$(SWIFT) package --allow-writing-to-directory .build/docs \
			generate-documentation --target $$target --output-path .build/docs/$$target \
			--transform-for-static-hosting --warnings-as-errors || exit 1; \
	done

clean:
	rm -rf .build

# The Debian package (debian/): dpkg-buildpackage with debhelper, binaries with the Swift runtime linked in
# (--static-swift-stdlib, scratch path .build-deb), then lintian. The package and its build records land in
# .build-deb/dist. `make package-test` installs it into a Debian 12 root made with debootstrap and uses it there.
deb:
	@scripts/bootstrap package
	SWIFT="$(SWIFT)" scripts/build-deb

package-test: deb
	scripts/package-test

# localauthd, lactl, the PAM service file, the systemd units (socket activation), the man pages, lactl's completions
# (bash, zsh, fish) and lactl's registration as an administrative tool (/etc/localauthd/apps.d/lactl.conf), pinned
# to the installed build's SHA-256 (installing again pins the new build). As root; DESTDIR for staging.
PREFIX ?= /usr/local
SBINDIR = $(PREFIX)/sbin
BINDIR = $(PREFIX)/bin
SYSTEMD_UNIT_DIR ?= /lib/systemd/system
SYSTEMD_USER_UNIT_DIR ?= /usr/lib/systemd/user
PAM_MODULE_DIR ?= /usr/lib/$(shell dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)/security
MANDIR ?= $(PREFIX)/share/man
BASH_COMPLETION_DIR ?= $(PREFIX)/share/bash-completion/completions
ZSH_COMPLETION_DIR ?= $(PREFIX)/share/zsh/site-functions
FISH_COMPLETION_DIR ?= $(PREFIX)/share/fish/vendor_completions.d
# Read by the session bus before /usr/share/dbus-1/services (where a distribution's gnome-keyring puts its own).
DBUS_SESSION_SERVICE_DIR ?= $(PREFIX)/share/dbus-1/services
install: bootstrap pam
	$(SWIFT) build -c release $(SWIFT_BUILD_FLAGS) --product localauthd
	$(SWIFT) build -c release $(SWIFT_BUILD_FLAGS) --product lactl
	$(SWIFT) build -c release $(SWIFT_BUILD_FLAGS) --product generate-manual
	scripts/generate-manual-and-completions "$$($(SWIFT) build -c release $(SWIFT_BUILD_FLAGS) --show-bin-path)" \
		.build/install-docs "$$(date -u +%Y-%m-%d)"
	install -D -m 0644 .build/install-docs/man/lactl.1 $(DESTDIR)$(MANDIR)/man1/lactl.1
	install -D -m 0644 Resources/man/localauthd.8 $(DESTDIR)$(MANDIR)/man8/localauthd.8
	install -D -m 0644 Resources/man/pam_localauth.8 $(DESTDIR)$(MANDIR)/man8/pam_localauth.8
	install -D -m 0644 Resources/man/localauthd.conf.5 $(DESTDIR)$(MANDIR)/man5/localauthd.conf.5
	install -D -m 0644 .build/install-docs/completions/lactl $(DESTDIR)$(BASH_COMPLETION_DIR)/lactl
	install -D -m 0644 .build/install-docs/completions/_lactl $(DESTDIR)$(ZSH_COMPLETION_DIR)/_lactl
	install -D -m 0644 .build/install-docs/completions/lactl.fish $(DESTDIR)$(FISH_COMPLETION_DIR)/lactl.fish
	install -D -m 0755 .build/release/localauthd $(DESTDIR)$(SBINDIR)/localauthd
	install -D -m 0755 .build/release/lactl $(DESTDIR)$(BINDIR)/lactl
	install -D -m 0644 Resources/pam.d/local-authentication $(DESTDIR)/etc/pam.d/local-authentication
	install -D -m 0644 Resources/systemd/localauthd.socket $(DESTDIR)$(SYSTEMD_UNIT_DIR)/localauthd.socket
	sed 's|@SBINDIR@|$(SBINDIR)|' Resources/systemd/localauthd.service > localauthd.service.tmp
	install -D -m 0644 localauthd.service.tmp $(DESTDIR)$(SYSTEMD_UNIT_DIR)/localauthd.service
	rm -f localauthd.service.tmp
	install -D -m 0644 .build/pam/pam_localauth.so $(DESTDIR)$(PAM_MODULE_DIR)/pam_localauth.so
	sed 's|@BINDIR@|$(BINDIR)|' Resources/systemd/user/localauthd-screen-lock.service > screen-lock.service.tmp
	install -D -m 0644 screen-lock.service.tmp $(DESTDIR)$(SYSTEMD_USER_UNIT_DIR)/localauthd-screen-lock.service
	rm -f screen-lock.service.tmp
	sed 's|@BINDIR@|$(BINDIR)|' Resources/systemd/user/localauthd-agent.service > agent.service.tmp
	install -D -m 0644 agent.service.tmp $(DESTDIR)$(SYSTEMD_USER_UNIT_DIR)/localauthd-agent.service
	rm -f agent.service.tmp
	sed 's|@BINDIR@|$(BINDIR)|' Resources/systemd/user/lactl-ssh-agent.service > ssh-agent.service.tmp
	install -D -m 0644 ssh-agent.service.tmp $(DESTDIR)$(SYSTEMD_USER_UNIT_DIR)/lactl-ssh-agent.service
	rm -f ssh-agent.service.tmp
	sed 's|@BINDIR@|$(BINDIR)|' Resources/systemd/user/lactl-secret-service.service > secret-service.service.tmp
	install -D -m 0644 secret-service.service.tmp $(DESTDIR)$(SYSTEMD_USER_UNIT_DIR)/lactl-secret-service.service
	rm -f secret-service.service.tmp
	sed 's|@BINDIR@|$(BINDIR)|' Resources/systemd/user/lactl-fido.service > fido.service.tmp
	install -D -m 0644 fido.service.tmp $(DESTDIR)$(SYSTEMD_USER_UNIT_DIR)/lactl-fido.service
	rm -f fido.service.tmp
	install -D -m 0644 Resources/udev/70-lactl-fido-uhid.rules \
		$(DESTDIR)$(PREFIX)/share/local-authentication/udev/70-lactl-fido-uhid.rules
	sed 's|@BINDIR@|$(BINDIR)|' Resources/dbus-1/org.freedesktop.secrets.service > secrets-activation.tmp
	install -D -m 0644 secrets-activation.tmp $(DESTDIR)$(DBUS_SESSION_SERVICE_DIR)/org.freedesktop.secrets.service
	rm -f secrets-activation.tmp
	install -d -m 0755 $(DESTDIR)/etc/localauthd/apps.d
	printf 'application-identifier = localauthentication.lactl\nexecutable = %s\nsha256 = %s\nadministrative = yes\n' \
		"$(BINDIR)/lactl" "$$(sha256sum $(DESTDIR)$(BINDIR)/lactl | cut -d' ' -f1)" > lactl.conf.tmp
	install -m 0644 lactl.conf.tmp $(DESTDIR)/etc/localauthd/apps.d/lactl.conf
	rm -f lactl.conf.tmp
	@echo "Installed. Enable with: systemctl daemon-reload && systemctl enable --now localauthd.socket"
	@echo "Point programs at it with LA_DAEMON_SOCKET=/run/localauthd/socket or /etc/local-authentication/client.conf"
	@echo "Login keychain: add the pam_localauth.so lines of docs/LOGIN-KEYCHAIN.md to /etc/pam.d/common-auth,"
	@echo "common-session and common-password (not edited here); screen lock: systemctl --user enable --now localauthd-screen-lock"
	@echo "Prompt agent (pinentry draws the questions, programs never see the passcode): systemctl --user enable --now localauthd-agent"

uninstall:
	rm -f $(DESTDIR)$(SBINDIR)/localauthd $(DESTDIR)$(BINDIR)/lactl $(DESTDIR)/etc/pam.d/local-authentication
	rm -f $(DESTDIR)/etc/localauthd/apps.d/lactl.conf
	rm -f $(DESTDIR)$(SYSTEMD_UNIT_DIR)/localauthd.socket $(DESTDIR)$(SYSTEMD_UNIT_DIR)/localauthd.service
	rm -f $(DESTDIR)$(PAM_MODULE_DIR)/pam_localauth.so $(DESTDIR)$(SYSTEMD_USER_UNIT_DIR)/localauthd-screen-lock.service
	rm -f $(DESTDIR)$(SYSTEMD_USER_UNIT_DIR)/localauthd-agent.service $(DESTDIR)$(SYSTEMD_USER_UNIT_DIR)/lactl-ssh-agent.service \
		$(DESTDIR)$(SYSTEMD_USER_UNIT_DIR)/lactl-secret-service.service $(DESTDIR)$(SYSTEMD_USER_UNIT_DIR)/lactl-fido.service
	rm -f $(DESTDIR)$(PREFIX)/share/local-authentication/udev/70-lactl-fido-uhid.rules
	rm -f $(DESTDIR)$(DBUS_SESSION_SERVICE_DIR)/org.freedesktop.secrets.service
	rm -f $(DESTDIR)$(MANDIR)/man1/lactl.1 $(DESTDIR)$(MANDIR)/man8/localauthd.8 $(DESTDIR)$(MANDIR)/man8/pam_localauth.8
	rm -f $(DESTDIR)$(MANDIR)/man5/localauthd.conf.5 $(DESTDIR)$(BASH_COMPLETION_DIR)/lactl
	rm -f $(DESTDIR)$(ZSH_COMPLETION_DIR)/_lactl $(DESTDIR)$(FISH_COMPLETION_DIR)/lactl.fish
