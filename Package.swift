// swift-tools-version:6.2
// Apple's LocalAuthentication and Keychain Services for Swift programs on Linux.
// Layout and responsibilities: docs/ARCHITECTURE.md.

import PackageDescription

/// A pkg-config file of this package, by absolute path (SwiftPM looks a bare name up in the system's search path
/// only). Used where the system's file brings a flag SwiftPM refuses with a warning on every build.
func packagePkgConfig(_ file: String) -> String {
    String(#filePath[..<#filePath.lastIndex(of: "/")!]) + "/" + file
}

/// For the modules that hand out views of bytes as `RawSpan`s bound to what they view (`@_lifetime`): the feature
/// swift-nio and swift-collections build with. swift-nio's manifest cites the Language Steering Group's promise not
/// to break what exists under it without two subsequent releases (forums.swift.org/t/78638). Only the declaring
/// module needs it; its users do not.
let lifetimes: [SwiftSetting] = [.enableExperimentalFeature("Lifetimes")]

let package = Package(
    name: "swift-local-authentication",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "LocalAuthentication", targets: ["LocalAuthentication"]),
        .library(name: "KeychainServices", targets: ["KeychainServices"]),
        // Our typed Swift API over the keychain (Keychain, GenericPassword, KeychainError…): not Apple's names, so
        // kept out of KeychainServices, whose importers must see Apple's names only.
        .library(name: "SwiftKeychain", targets: ["SwiftKeychain"]),
        // Combine publishers (through OpenCombine) beside the async sequences; its own product, so programs that do
        // not use Combine do not build OpenCombine.
        .library(name: "LocalAuthenticationCombine", targets: ["LocalAuthenticationCombine"]),
        // Our addition: checking that a key is held by a TPM (the server's side; needs no TPM library).
        .library(name: "KeyAttestation", targets: ["KeyAttestation"]),
        .executable(name: "lactl", targets: ["lactl"]),
        .executable(name: "localauthd", targets: ["localauthd"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // ChallengeSigning's HTTP server and client, the SSH agent's socket, the FIDO authenticator's UDP transport.
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        // Examples only: ChallengeSigning's verifier on an independent crypto path.
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        // localauthd: start, graceful stop on SIGTERM.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        // Combine's API on Linux, for LocalAuthenticationCombine only.
        .package(url: "https://github.com/OpenCombine/OpenCombine", from: "0.14.0"),
        // `make docs`: the public modules' DocC catalogs (swift package generate-documentation). A plugin only.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        // Tests only: property-based round trips of every protocol message.
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.1"),
    ],
    targets: [
        // C libraries, one thin system-library target each.
        .systemLibrary(
            name: "COpenSSL", pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]),
        .systemLibrary(
            name: "CPAM", pkgConfig: "pam",
            providers: [.apt(["libpam0g-dev"])]),
        .systemLibrary(
            name: "CFPrint", pkgConfig: packagePkgConfig("Sources/CFPrint/la-libfprint-2.pc"),
            providers: [.apt(["libfprint-2-dev", "libglib2.0-dev"])]),
        // keyutils: the kernel keyring, where the embedded engine keeps unlocked class keys.
        .systemLibrary(
            name: "CKeyutils", pkgConfig: "libkeyutils",
            providers: [.apt(["libkeyutils-dev"])]),
        // What Swift's Glibc module leaves out, compiled: accept4, memfd seals and descriptor passing for the lane,
        // its mailbox's atomics, thread names, the kernel's process events.
        .target(name: "CSocket"),
        // sqlite3_config for localauthd (variadic, so not callable from Swift).
        .target(name: "CSQLiteSettings", linkerSettings: [.linkedLibrary("sqlite3")]),
        // GLib's D-Bus (GDBus): the fprintd backend's client (CFprintd), in C.
        .systemLibrary(
            name: "CGio", pkgConfig: packagePkgConfig("Sources/CGio/la-gio-2.0.pc"),
            providers: [.apt(["libglib2.0-dev"])]),
        // fprintd's D-Bus API as plain synchronous C functions (no variadic GVariant call reaches Swift).
        .target(name: "CFprintd", dependencies: ["CGio"]),
        // A service's end of the session bus for the Secret Service provider: its name, its calls queued in order.
        .target(name: "CSecretBus", dependencies: ["CGio"]),
        // tpm2-tss: ESAPI, the TCTI loader (device, swtpm), marshalling, error texts.
        .systemLibrary(
            name: "CTSS2", pkgConfig: "tss2-esys",
            providers: [.apt(["libtss2-dev"])]),

        // What Swift cannot call in libcrypto directly, compiled: a macro, HMAC from prepared states, AES-GCM
        // decryption through the provider's functions with EVP as the fallback.
        .target(name: "COpenSSLShims", dependencies: ["COpenSSL"]),
        // Primitives: P-256, ECDSA, ECDH, Apple ECIES, AES-GCM, HKDF, X9.63 KDF, SecureBytes over OpenSSL 3.
        .target(name: "SecureCrypto", dependencies: ["COpenSSL", "COpenSSLShims"]),
        // Threads for blocking work: one dedicated thread per blocking C library, a task executor of its own for
        // synchronous edges, threads named for the kernel.
        .target(name: "WorkThreads", dependencies: ["CSocket"]),
        // The messages between the public API and the engine, and their one canonical tag-length-value codec.
        .target(name: "SecurityProtocol", dependencies: ["SecureCrypto"], swiftSettings: lifetimes),
        // Bytes between a client and localauthd: frames read from a stream socket, the lane's shared-memory mailbox
        // and its doorbell, the pollers' back-off. Knows no message.
        .target(name: "SecurityTransport", dependencies: ["SecureCrypto", "CSocket"]),
        // Private store files: 0700/0600, atomic writes through unpredictable exclusive temporaries, locks, key files.
        .target(name: "StoreFiles", dependencies: ["SecureCrypto"]),
        // State: the encrypted SQLite keychain database and its item codec.
        .target(
            name: "KeychainStore",
            dependencies: [
                "SecurityProtocol", "SecureCrypto", .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ], swiftSettings: lifetimes),
        // Secrets: device root key, protection-class keys, enclave-held P-256 keys.
        // A TPM 2.0 through tpm2-tss: sealed data, P-256 keys made and used inside it, its properties.
        // The TPM objects' templates, in C (TPM2B and union fields are awkward to fill from Swift).
        .target(name: "CTSS2Templates", dependencies: ["CTSS2"]),
        .target(name: "TrustedPlatform", dependencies: ["CTSS2", "CTSS2Templates", "SecureCrypto", "StoreFiles"]),
        .target(name: "Enclave", dependencies: ["SecureCrypto", "StoreFiles", "TrustedPlatform", "CKeyutils"]),
        // Key attestation: the messages between a TPM's owner and a verifier, and the verifier (X.509 chains,
        // credential protection, certification statements) on OpenSSL alone.
        .target(name: "KeyAttestation", dependencies: ["SecureCrypto", "COpenSSL", "COpenSSLShims"]),
        // Authenticators: passcodes through PAM, fingerprints through libfprint-2 or fprintd, attempt policy.
        .target(
            name: "Authenticators",
            dependencies: [
                "WorkThreads",
                "CPAM", "CFPrint", "CFprintd", "SecureCrypto", "SecurityProtocol", "StoreFiles",
                .product(name: "Logging", package: "swift-log"),
            ]),
        // The engine: the only code that touches state (keychain rules, ACLs, contexts, rights, lockout).
        .target(
            name: "SecurityServer",
            dependencies: [
                "WorkThreads",
                "KeychainStore", "Enclave", "Authenticators", "SecureCrypto", "SecurityProtocol", "StoreFiles",
                .product(name: "Logging", package: "swift-log"),
            ], swiftSettings: lifetimes),
        // Client side: one protocol to send a request to the engine, and the client of localauthd (its socket and
        // lane). A program that talks only to the daemon links no engine module.
        .target(
            name: "SecurityClient",
            dependencies: ["SecurityTransport", "WorkThreads", "SecurityProtocol", "SecureCrypto", "StoreFiles"]),
        // The engine inside the calling program: the embedded client, its configuration, the default client choice.
        .target(
            name: "EmbeddedEngine",
            dependencies: [
                "WorkThreads", "SecurityClient", "SecurityServer", "SecurityProtocol", "Authenticators", "StoreFiles",
            ]),
        // Public API: SecItem*, SecAccessControl, SecKey*, kSec* constants, OSStatus.
        .target(
            name: "KeychainServices",
            dependencies: ["SecurityClient", "EmbeddedEngine", "SecurityProtocol", "SecureCrypto"]),
        // Public API, ours: the typed Keychain over the same engine.
        .target(
            name: "SwiftKeychain",
            dependencies: [
                "WorkThreads",
                "KeychainServices", "SecurityClient", "EmbeddedEngine", "SecurityProtocol", "SecureCrypto",
                "KeyAttestation",
            ]),
        // Public API: LAContext, LAError, LARight, LAPersistedRight, LARightStore.
        .target(
            name: "LocalAuthentication",
            dependencies: [
                "WorkThreads", "KeychainServices", "SecurityClient", "SecurityProtocol", "SecureCrypto",
                "KeyAttestation",
            ]),

        // Publishers of right states and keychain events, and Foundation's NotificationCenter publisher.
        .target(
            name: "LocalAuthenticationCombine",
            dependencies: [
                "LocalAuthentication", "SwiftKeychain",
                .product(name: "OpenCombine", package: "OpenCombine"),
                .product(name: "OpenCombineFoundation", package: "OpenCombine"),
            ]),

        // A Unix-socket connection's peer as the kernel reports it (SO_PEERCRED): the agent's and the daemon's.
        .target(
            name: "SocketPeer",
            dependencies: [
                "SecureCrypto", "SecurityProtocol", "CSocket", .product(name: "NIOCore", package: "swift-nio"),
            ]),
        // The app registry (`<config-directory>/apps.d`): which program is which application, with which groups.
        .target(name: "AppRegistry"),
        // The daemon's server: per-user engines, frames on a Unix socket, one session per connection.
        .target(
            name: "SecurityDaemon",
            dependencies: [
                "SecurityTransport", "WorkThreads",
                "SecurityServer", "Authenticators", "SecureCrypto", "SecurityProtocol", "SocketPeer", "StoreFiles",
                "AppRegistry", "Enclave", "CSocket", "CSQLiteSettings",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        .executableTarget(
            name: "localauthd",
            dependencies: [
                "WorkThreads",
                "SecurityDaemon", "SecurityProtocol",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]),

        // The agent protocol's wire types and messages, on their own so the fuzz target builds nothing else.
        .target(name: "SSHAgentProtocol"),
        // The OpenSSH agent protocol over persisted rights (`lactl ssh-agent`, `lactl ssh-key`).
        .target(
            name: "SSHAgent",
            dependencies: [
                "SSHAgentProtocol", "LocalAuthentication", "KeychainServices", "SecurityClient", "SecureCrypto",
                "SocketPeer", "SecurityProtocol",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]),

        // FIDO2's wire alone (CTAP 2.1's CBOR and CTAPHID framing), so the fuzz target builds nothing else.
        .target(name: "FIDOProtocol"),
        // A CTAP 2.1 authenticator whose credentials are persisted rights, over CTAPHID (`lactl fido`).
        .target(
            name: "FIDOAuthenticator",
            dependencies: [
                "FIDOProtocol", "LocalAuthentication", "KeychainServices", "SecurityClient", "SecureCrypto",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]),

        // The freedesktop Secret Service (org.freedesktop.secrets) over the keychain, for `lactl secret-service`.
        .target(
            name: "SecretService",
            dependencies: [
                "CSecretBus", "CGio", "KeychainServices", "SecurityClient", "SecurityProtocol", "SecureCrypto",
            ]),

        // The command-line tool for people.
        .executableTarget(
            name: "lactl",
            dependencies: [
                "SecurityTransport", "WorkThreads", "SecretService",
                "LocalAuthentication", "KeychainServices", "SwiftKeychain", "SSHAgent", "SecurityClient",
                "EmbeddedEngine", "SecurityProtocol", "Authenticators", "SecureCrypto", "StoreFiles", "AppRegistry",
                "KeyAttestation", "SocketPeer", "FIDOAuthenticator",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]),

        // libFuzzer over the agent's message parser and localauthd's frames (`make fuzz`, FUZZ_TARGET picks one);
        // without -DFUZZING it replays the seed corpora.
        .executableTarget(
            name: "message-fuzz",
            dependencies: ["SecurityTransport", "SSHAgentProtocol", "SecurityProtocol", "AppRegistry", "FIDOProtocol"],
            path: "Fuzz",
            exclude: [
                "AgentMessage/Corpus", "ProtocolFrame/Corpus", "AppRegistration/Corpus", "FIDO/CBORCorpus",
                "FIDO/CTAPHIDCorpus", "FIDO/U2FCorpus",
            ]),

        // Benchmarks: ratios against baselines measured in the same run (`make bench`).
        .executableTarget(
            name: "la-bench",
            dependencies: [
                "SecurityTransport",
                "SecureCrypto", "CPAM", "CFPrint", "EmbeddedEngine", "COpenSSL", "Authenticators", "KeychainStore",
                "SecurityProtocol", "SecurityServer",
                "SecurityClient", "KeychainServices", "LocalAuthentication", "SSHAgent", "Enclave", "CRawSQLite",
                "FIDOAuthenticator", "FIDOProtocol",
            ],
            path: "Benchmarks/la-bench"),
        // The keychain benchmark's raw side: the same table through the SQLite C API, statements prepared once.
        .target(name: "CRawSQLite", path: "Benchmarks/CRawSQLite", linkerSettings: [.linkedLibrary("sqlite3")]),

        // What several test targets share: the virtual-reader lock, subprocess and pseudo-terminal helpers, pam_matrix,
        // enrollment through the engine's requests.
        .target(
            name: "TestSupport",
            dependencies: [
                "Authenticators", "EmbeddedEngine", "SecureCrypto", "SecurityClient", "SecurityProtocol",
                "SecurityServer", "AppRegistry",
                "Enclave",
            ],
            path: "Tests/TestSupport"),
        .testTarget(
            name: "AuthenticatorsTests",
            dependencies: ["Authenticators", "StoreFiles", "SecureCrypto", "SecurityProtocol", "TestSupport"]),
        // LAContext, presenters, contexts and access control against the virtual reader and pam_matrix.
        // ConstantBridgingTests walks every string constant its dependencies export, listed from their sources at
        // build time by the ExportedConstantTable plugin.
        .testTarget(
            name: "LocalAuthenticationTests",
            dependencies: [
                "WorkThreads",
                "LocalAuthentication", "EmbeddedEngine", "KeychainServices", "SecurityClient", "SecurityProtocol",
                "SecurityServer",
                "Authenticators", "SecureCrypto", "lactl", "TestSupport", "Enclave",
            ],
            plugins: ["ExportedConstantTable"]),
        .plugin(name: "ExportedConstantTable", capability: .buildTool()),
        // Keychain tests: semantics, tampering, scale, and two processes / SIGKILL through keychain-stress.
        .executableTarget(
            name: "keychain-stress", dependencies: ["SecurityClient", "EmbeddedEngine", "SecurityProtocol"]),
        // CTAP 2.1's CBOR and CTAPHID framing against the specifications' examples, and the CTAPHID server.
        .testTarget(name: "FIDOTests", dependencies: ["FIDOProtocol", "FIDOAuthenticator", "TestSupport"]),
        .testTarget(
            name: "KeychainStoreTests",
            dependencies: ["KeychainStore", "Enclave", "SecurityProtocol", "SecureCrypto", "TestSupport"]),
        .testTarget(
            name: "KeychainServicesTests",
            dependencies: [
                "WorkThreads",
                "KeychainServices", "EmbeddedEngine", "SwiftKeychain", "SecurityClient", "SecurityProtocol",
                "SecurityServer",
                "KeychainStore", "keychain-stress", "Authenticators", "SecureCrypto",
                "KeychainWrapperFixture", "TestSupport",
            ],
            resources: [.copy("Fixtures")]),
        // A wrapper with its own `Keychain` and `KeychainError`, as open-source ones have: compiles only while
        // KeychainServices exports Apple's names alone.
        .target(
            name: "KeychainWrapperFixture", dependencies: ["KeychainServices"],
            path: "Tests/Fixtures/KeychainWrapperFixture"),
        // SecKey: software and enclave P-256 keys, access-control-gated private-key operations.
        .testTarget(
            name: "SecKeyTests",
            dependencies: [
                "KeychainServices", "EmbeddedEngine", "Authenticators", "LocalAuthentication", "SecurityClient",
                "SecurityProtocol", "SecurityServer",
                "KeychainStore", "Enclave", "SecureCrypto", "TestSupport",
            ]),
        // LARight, LARightStore, LAPersistedRight against the virtual reader and pam_matrix.
        .testTarget(
            name: "RightsTests",
            dependencies: [
                "LocalAuthentication", "EmbeddedEngine", "SecureCrypto", "KeychainServices", "SecurityClient",
                "SecurityProtocol", "SecurityServer",
                "Authenticators", "lactl", "FIDOAuthenticator", "LocalAuthenticationCombine", "SwiftKeychain",
                "TestSupport",
            ]),
        // Code that ignores every result of Keychain Services and LocalAuthentication, as Apple's imported functions
        // allow: built with -warnings-as-errors, so a missing @discardableResult fails the build.
        .executableTarget(
            name: "discarded-results", dependencies: ["KeychainServices", "LocalAuthentication"],
            path: "Tests/Fixtures/DiscardedResults", swiftSettings: [.unsafeFlags(["-warnings-as-errors"])]),
        // Examples (README.md, "Examples"), built and run as subprocesses by ExamplesTests.
        .executableTarget(
            name: "GuardedOperation", dependencies: ["LocalAuthentication"], path: "Examples/GuardedOperation"),
        .executableTarget(
            name: "ChallengeSigning",
            dependencies: [
                "LocalAuthentication", "KeychainServices", "Authenticators", "SecurityClient", "SecurityProtocol",
                "SecurityServer", "SecureCrypto", "KeyAttestation",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "Examples/ChallengeSigning"),
        .executableTarget(name: "RightObserver", dependencies: ["LocalAuthentication"], path: "Examples/RightObserver"),
        .testTarget(
            name: "ExamplesTests",
            dependencies: [
                "GuardedOperation", "Authenticators", "ChallengeSigning", "RightObserver", "SecurityServer",
                "TestSupport",
            ]),
        // Two programs built for the isolation tests (distinct executables, one shared command set): what one
        // app's items, keys and references are to another program of the same user.
        .target(
            name: "IsolationProbe",
            dependencies: [
                "SecurityTransport",
                "KeychainServices", "EmbeddedEngine", "LocalAuthentication", "SecureCrypto", "SecurityClient",
                "SecurityProtocol",
            ],
            path: "Tests/Fixtures/IsolationProbes/Shared"),
        .executableTarget(
            name: "isolation-probe-a", dependencies: ["IsolationProbe"], path: "Tests/Fixtures/IsolationProbes/ProbeA"),
        .executableTarget(
            name: "isolation-probe-b", dependencies: ["IsolationProbe"], path: "Tests/Fixtures/IsolationProbes/ProbeB"),
        // localauthd as a real process: requests over its socket, contexts per connection, clients going away,
        // hostile frames, restarts.
        .testTarget(
            name: "DaemonTests",
            dependencies: [
                "SecurityTransport",
                "SecurityClient", "SecurityProtocol", "SecureCrypto", "StoreFiles", "Authenticators", "TestSupport",
                "SocketPeer", "AppRegistry", "localauthd", "lactl", "isolation-probe-a", "isolation-probe-b", "CSocket",
            ]),
        // tpm2-tss against swtpm: sealing, TPM-held P-256 keys, another TPM, changed bytes, left-over objects; the
        // TPM enclave against a copied store directory.
        .testTarget(
            name: "TrustedPlatformTests",
            dependencies: [
                "TrustedPlatform", "EmbeddedEngine", "Enclave", "SecureCrypto", "SecurityClient", "SecurityProtocol",
                "SecurityServer",
                "TestSupport", "lactl", "keychain-stress", "COpenSSL", "KeyAttestation",
            ]),
        // The protocol's codec: every message round-trips (property-based), hostile frames fail cleanly.
        .testTarget(
            name: "SecurityProtocolTests",
            dependencies: [
                "SecurityProtocol", "SecureCrypto", "TestSupport",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ]),
        .testTarget(
            name: "SecureCryptoTests",
            dependencies: ["SecureCrypto", "TestSupport"],
            resources: [.copy("Vectors")]),
    ]
)
