internal import COpenSSL
internal import COpenSSLShims
import Foundation
import Synchronization

/// AES-GCM on OpenSSL 3, with 128-, 192- or 256-bit keys, 12- or 16-byte nonces (Apple's ECIES uses 16; GCM then
/// derives its counter block through GHASH) and a 16-byte tag. Sealing goes through the EVP cipher interface;
/// opening (every item read) calls the provider's cipher functions directly (``DecryptionContext``).
///
/// Opening never returns plaintext unless the tag verifies: a wrong key, nonce, associated data or a changed
/// ciphertext is `CryptoError.authenticationFailure`.
package enum AESGCM {
    package static let tagByteCount = 16

    /// A GCM nonce (initialization vector) of 12 or 16 bytes.
    package struct Nonce: Sendable, Equatable {
        package let bytes: Data

        /// Wraps `bytes`. - Throws: `invalidParameter` unless they are 12 or 16 bytes.
        package init(_ bytes: Data) throws {
            guard bytes.count == 12 || bytes.count == 16 else {
                throw CryptoError(.invalidParameter, "AES-GCM nonce must be 12 or 16 bytes, not \(bytes.count)")
            }
            self.bytes = Data(bytes)
        }

        /// A fresh random 12-byte nonce.
        package static func random() throws -> Nonce {
            try Nonce(SecureRandom.bytes(12))
        }
    }

    /// The result of sealing: nonce, ciphertext (as long as the plaintext) and tag.
    package struct SealedBox: Sendable, Equatable {
        package var nonce: Nonce
        package var ciphertext: Data
        package var tag: Data

        package init(nonce: Nonce, ciphertext: Data, tag: Data) throws {
            guard tag.count == AESGCM.tagByteCount else {
                throw CryptoError(.invalidParameter, "AES-GCM tag must be 16 bytes, not \(tag.count)")
            }
            self.nonce = nonce
            self.ciphertext = ciphertext
            self.tag = tag
        }

        /// `nonce || ciphertext || tag`.
        package var combined: Data { nonce.bytes + ciphertext + tag }

        /// Splits `nonce || ciphertext || tag`. - Throws: `invalidCiphertext` when too short.
        package init(combined: Data, nonceByteCount: Int = 12) throws {
            guard combined.count >= nonceByteCount + AESGCM.tagByteCount else {
                throw CryptoError(.invalidCiphertext, "AES-GCM box is \(combined.count) bytes, too short")
            }
            let start = combined.startIndex
            let nonceEnd = start + nonceByteCount
            let tagStart = combined.endIndex - AESGCM.tagByteCount
            try self.init(
                nonce: Nonce(Data(combined[start..<nonceEnd])),
                ciphertext: Data(combined[nonceEnd..<tagStart]),
                tag: Data(combined[tagStart...]))
        }
    }

    /// Encrypts and authenticates `plaintext`, binding `authenticatedData` into the tag.
    package static func seal(
        _ plaintext: UnsafeRawBufferPointer, using key: SecureBytes, nonce: Nonce? = nil,
        authenticating authenticatedData: UnsafeRawBufferPointer = UnsafeRawBufferPointer(start: nil, count: 0)
    ) throws -> SealedBox {
        let nonce = try nonce ?? Nonce.random()
        let ctx = try encryptionContext(key: key, nonce: nonce)
        defer { EVP_CIPHER_CTX_free(ctx) }
        try addAuthenticatedData(authenticatedData, to: ctx)
        var ciphertext = Data(count: plaintext.count)
        try ciphertext.withUnsafeMutableBytes { try update(ctx, input: plaintext, output: $0) }
        var outLength: Int32 = 0
        var scratch = [UInt8](repeating: 0, count: 32)
        guard EVP_EncryptFinal_ex(ctx, &scratch, &outLength) == 1 else {
            throw CryptoError.drainingQueue(.internalFailure, "AES-GCM EncryptFinal failed")
        }
        var tag = Data(count: tagByteCount)
        let gotTag = tag.withUnsafeMutableBytes {
            EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, Int32(tagByteCount), $0.baseAddress)
        }
        guard gotTag == 1 else { throw CryptoError.drainingQueue(.internalFailure, "AES-GCM could not read the tag") }
        return try SealedBox(nonce: nonce, ciphertext: ciphertext, tag: tag)
    }

    /// Encrypts and authenticates `plaintext`, binding `authenticatedData` into the tag.
    package static func seal(
        _ plaintext: some ContiguousBytes, using key: SecureBytes, nonce: Nonce? = nil,
        authenticating authenticatedData: some ContiguousBytes = Data()
    ) throws -> SealedBox {
        try plaintext.withUnsafeBytes { p in
            try authenticatedData.withUnsafeBytes { a in try seal(p, using: key, nonce: nonce, authenticating: a) }
        }
    }

    /// Encrypts and authenticates a secret.
    package static func seal(
        _ plaintext: SecureBytes, using key: SecureBytes, nonce: Nonce? = nil,
        authenticating authenticatedData: some ContiguousBytes = Data()
    ) throws -> SealedBox {
        try plaintext.withUnsafeBytes { p in
            try authenticatedData.withUnsafeBytes { a in try seal(p, using: key, nonce: nonce, authenticating: a) }
        }
    }

    /// Frees the idle decryption contexts kept for row keys (the provider wipes each as it frees it): called when
    /// the keychain locks, so nothing of the keys used while it was unlocked stays in memory.
    package static func discardIdleContexts() {
        let idle = DecryptionContext.idle.withLock { contexts in
            defer { contexts = [] }
            return contexts
        }
        _ = idle
    }

    /// Whether any idle decryption context holds `bytes` anywhere in its memory (the provider's context, as large
    /// as malloc made it): for tests that a returned context keeps nothing of its last key.
    package static func idleContextsContain(_ bytes: [UInt8]) -> Bool {
        DecryptionContext.idle.withLock { contexts in
            contexts.contains { $0.memoryContains(bytes) }
        }
    }

    /// Verifies and decrypts `box`. - Throws: `authenticationFailure` when anything does not match.
    package static func open(
        _ box: SealedBox, using key: SecureBytes,
        authenticating authenticatedData: UnsafeRawBufferPointer
    ) throws -> SecureBytes {
        try box.nonce.bytes.withUnsafeBytes { nonce in
            try box.ciphertext.withUnsafeBytes { ciphertext in
                try box.tag.withUnsafeBytes { tag in
                    try open(
                        nonce: nonce, ciphertext: ciphertext, tag: tag, using: key, authenticating: authenticatedData)
                }
            }
        }
    }

    /// Verifies and decrypts `nonce (12 bytes) || ciphertext || tag` where it lies, without splitting it into a
    /// `SealedBox` first (the keychain's lookup opens two of these per item).
    ///
    /// - Throws: `invalidCiphertext` when too short, `authenticationFailure` when anything does not match.
    package static func open(
        combined: UnsafeRawBufferPointer, using key: SecureBytes,
        authenticating authenticatedData: UnsafeRawBufferPointer
    ) throws -> SecureBytes {
        let (nonce, ciphertext, tag) = try split(combined: combined)
        return try open(nonce: nonce, ciphertext: ciphertext, tag: tag, using: key, authenticating: authenticatedData)
    }

    /// `nonce (12 bytes) || ciphertext || tag`, in its parts. - Throws: `invalidCiphertext` when too short.
    fileprivate static func split(
        combined: UnsafeRawBufferPointer
    ) throws -> (nonce: UnsafeRawBufferPointer, ciphertext: UnsafeRawBufferPointer, tag: UnsafeRawBufferPointer) {
        let nonceByteCount = 12
        guard combined.count >= nonceByteCount + tagByteCount, let base = combined.baseAddress else {
            throw CryptoError(.invalidCiphertext, "AES-GCM box is \(combined.count) bytes, too short")
        }
        let tagStart = combined.count - tagByteCount
        return (
            UnsafeRawBufferPointer(start: base, count: nonceByteCount),
            UnsafeRawBufferPointer(start: base + nonceByteCount, count: tagStart - nonceByteCount),
            UnsafeRawBufferPointer(start: base + tagStart, count: tagByteCount)
        )
    }

    /// The one opening both forms share. An AES-256 key (every row key of the keychain) is opened on a context kept
    /// for reuse and keyed anew; other sizes on a context of their own.
    private static func open(
        nonce: UnsafeRawBufferPointer, ciphertext: UnsafeRawBufferPointer, tag: UnsafeRawBufferPointer,
        using key: SecureBytes, authenticating authenticatedData: UnsafeRawBufferPointer
    ) throws -> SecureBytes {
        let pooled = key.count == 32
        let context =
            try pooled ? DecryptionContext.take() : DecryptionContext(functions: .forKeyByteCount(key.count))
        defer { if pooled { context.giveBack() } }
        try key.withUnsafeBytes { try context.start(key: $0, nonce: nonce, tag: tag) }
        return try context.decrypt(ciphertext, authenticating: authenticatedData)
    }

    /// The decryption functions of one AES-GCM cipher, looked up once: its provider's own, called as
    /// `EVP_DecryptInit_ex2`, `EVP_DecryptUpdate` and `EVP_DecryptFinal_ex` would, without the parameter searches
    /// OpenSSL 3.0's EVP layer adds around each call; EVP itself when the provider does not give all of them
    /// (Sources/COpenSSLShims/shims.c says more).
    fileprivate final class ProviderFunctions: @unchecked Sendable {
        // @unchecked: made once in init, only read afterwards.
        let table: OpaquePointer

        private init(_ cipher: OpaquePointer, forcingEVP: Bool = false) {
            guard let table = la_cipher_functions_new(cipher, forcingEVP ? 1 : 0) else {
                fatalError("no memory for the AES-GCM functions")
            }
            self.table = table
        }

        /// Whether decryptions call the provider's functions (else EVP's).
        var callsProviderDirectly: Bool { la_cipher_functions_direct(table) == 1 }

        static let aes128 = ProviderFunctions(OpenSSLAlgorithms.aes128GCM)
        static let aes192 = ProviderFunctions(OpenSSLAlgorithms.aes192GCM)
        static let aes256 = ProviderFunctions(OpenSSLAlgorithms.aes256GCM)
        /// The EVP path for each key size, as a provider without the functions would get: for the tests.
        static let evp = [
            16: ProviderFunctions(OpenSSLAlgorithms.aes128GCM, forcingEVP: true),
            24: ProviderFunctions(OpenSSLAlgorithms.aes192GCM, forcingEVP: true),
            32: ProviderFunctions(OpenSSLAlgorithms.aes256GCM, forcingEVP: true),
        ]

        static func forKeyByteCount(_ count: Int) throws -> ProviderFunctions {
            switch count {
            case 16: aes128
            case 24: aes192
            case 32: aes256
            default: throw CryptoError(.invalidParameter, "AES-GCM key must be 16, 24 or 32 bytes, not \(count)")
            }
        }
    }

    /// A provider's decryption context: keyed once and used for many nonces (``Opener``), or keyed anew for each
    /// opening. The key schedule of the last key stays in it until then; the provider wipes it when it is freed.
    /// Used by one thread at a time.
    fileprivate final class DecryptionContext: @unchecked Sendable {
        // @unchecked: used by one thread at a time (an opener's lock, or between `take()` and `giveBack()`).
        private let functions: ProviderFunctions
        private let context: UnsafeMutableRawPointer

        init(functions: ProviderFunctions) throws {
            guard let context = la_cipher_new(functions.table) else {
                throw CryptoError.drainingQueue(.internalFailure, "AES-GCM: the provider made no context")
            }
            self.functions = functions
            self.context = context
        }

        deinit {
            la_cipher_free(functions.table, context)
        }

        /// Whether the provider's context memory holds `needle` (for ``AESGCM/idleContextsContain(_:)``).
        func memoryContains(_ needle: [UInt8]) -> Bool {
            // glibc's malloc_usable_size, which Swift's Glibc module leaves out (malloc.h).
            typealias UsableSize = @convention(c) (UnsafeMutableRawPointer?) -> Int
            guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_usable_size") else { return false }
            let size = unsafeBitCast(symbol, to: UsableSize.self)(context)
            guard size >= needle.count, !needle.isEmpty else { return false }
            let memory = UnsafeRawBufferPointer(start: context, count: size)
            return (0...(size - needle.count)).contains { start in
                memory[start..<start + needle.count].elementsEqual(needle)
            }
        }

        /// Keys the context, for decryptions started with no key of their own.
        func setKey(_ key: UnsafeRawBufferPointer) throws {
            let keyed = la_cipher_decrypt_init(functions.table, context, key.nonNilBytes, key.count, nil, 0, nil, 0)
            guard keyed == 1 else { throw CryptoError.drainingQueue(.internalFailure, "AES-GCM initialization failed") }
        }

        /// Starts a decryption: keys the context anew when `key` is given, sets the nonce (12 or 16 bytes) and the
        /// tag to expect.
        func start(key: UnsafeRawBufferPointer?, nonce: UnsafeRawBufferPointer, tag: UnsafeRawBufferPointer) throws {
            guard nonce.count == 12 || nonce.count == 16 else {
                throw CryptoError(.invalidParameter, "AES-GCM nonce must be 12 or 16 bytes, not \(nonce.count)")
            }
            let started = la_cipher_decrypt_init(
                functions.table, context, key?.nonNilBytes, key?.count ?? 0, nonce.nonNilBytes, nonce.count,
                tag.nonNilBytes, tag.count)
            guard started == 1 else {
                throw CryptoError.drainingQueue(.internalFailure, "AES-GCM initialization failed")
            }
        }

        /// Decrypts `ciphertext` after `authenticatedData`: the plaintext only when the tag verifies, wiped
        /// otherwise.
        func decrypt(
            _ ciphertext: UnsafeRawBufferPointer, authenticating authenticatedData: UnsafeRawBufferPointer
        ) throws -> SecureBytes {
            if !authenticatedData.isEmpty {
                let added = la_cipher_update(
                    functions.table, context, nil, authenticatedData.nonNilBytes, authenticatedData.count)
                guard added == 1 else {
                    throw CryptoError.drainingQueue(.internalFailure, "AES-GCM could not add associated data")
                }
            }
            var plaintext = SecureBytes(zeros: ciphertext.count)
            if !ciphertext.isEmpty {
                let decrypted = plaintext.withUnsafeMutableBytes {
                    la_cipher_update(
                        functions.table, context, $0.baseAddress!.assumingMemoryBound(to: UInt8.self),
                        ciphertext.nonNilBytes, ciphertext.count)
                }
                guard decrypted == 1 else { throw CryptoError.drainingQueue(.internalFailure, "AES-GCM update failed") }
            }
            guard la_cipher_final(functions.table, context) == 1 else {
                OpenSSLErrorQueue.clear()
                // Wipe what was decrypted before the tag was checked; nothing of it leaves.
                plaintext = SecureBytes(zeros: 0)
                throw CryptoError(.authenticationFailure, "AES-GCM authentication failed")
            }
            return plaintext
        }

        static let idle = Mutex<[DecryptionContext]>([])
        private static let idleLimit = 8

        /// An idle AES-256 context, kept for keys used once each (a row's own key): allocating, setting up and
        /// freeing a context per opening cost more than opening a short value. A few are kept idle, one per thread
        /// opening at the same time.
        static func take() throws -> DecryptionContext {
            try idle.withLock { $0.popLast() } ?? DecryptionContext(functions: .aes256)
        }

        /// Returns the context to the pool, wiped first: keyed with an all-zero key and nonce, and one byte
        /// decrypted, so neither the last key's schedule and hash key nor the keystream of its last partial block
        /// stays in memory while it waits (a context that cannot be wiped is freed instead, which the provider wipes).
        func giveBack() {
            let zeros = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
            let wiped = withUnsafeBytes(of: zeros) { zero -> Bool in
                var byte: UInt8 = 0
                guard
                    la_cipher_decrypt_init(
                        functions.table, context, zero.nonNilBytes, 32, zero.nonNilBytes, 12, nil, 0) == 1
                else { return false }
                return la_cipher_update(functions.table, context, &byte, zero.nonNilBytes, 1) == 1
            }
            guard wiped else {
                OpenSSLErrorQueue.clear()
                return
            }
            Self.idle.withLock { contexts in
                if contexts.count < Self.idleLimit { contexts.append(self) }
            }
        }
    }

    /// Verifies and decrypts `box`. - Throws: `authenticationFailure` when anything does not match.
    package static func open(
        _ box: SealedBox, using key: SecureBytes, authenticating authenticatedData: some ContiguousBytes = Data()
    ) throws -> SecureBytes {
        try authenticatedData.withUnsafeBytes { try open(box, using: key, authenticating: $0) }
    }

    fileprivate static func cipher(forKeyByteCount count: Int) throws -> OpaquePointer {
        switch count {
        case 16: OpenSSLAlgorithms.aes128GCM
        case 24: OpenSSLAlgorithms.aes192GCM
        case 32: OpenSSLAlgorithms.aes256GCM
        default: throw CryptoError(.invalidParameter, "AES-GCM key must be 16, 24 or 32 bytes, not \(count)")
        }
    }

    /// An encryption context keyed with `key` and `nonce`: one initialization for a 12-byte nonce (GCM's default
    /// length), a length set in between for 16 bytes.
    private static func encryptionContext(key: SecureBytes, nonce: Nonce) throws -> OpaquePointer {
        let cipher = try cipher(forKeyByteCount: key.count)
        guard let ctx = EVP_CIPHER_CTX_new() else {
            throw CryptoError.drainingQueue(.internalFailure, "EVP_CIPHER_CTX_new failed")
        }
        let ok = key.withUnsafeBytes { k in
            nonce.bytes.withUnsafeBytes { nonce in
                if nonce.count == 12 {
                    return EVP_EncryptInit_ex2(ctx, cipher, k.nonNilBytes, nonce.nonNilBytes, nil) == 1
                }
                return EVP_EncryptInit_ex2(ctx, cipher, nil, nil, nil) == 1
                    && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_IVLEN, Int32(nonce.count), nil) == 1
                    && EVP_EncryptInit_ex2(ctx, nil, k.nonNilBytes, nonce.nonNilBytes, nil) == 1
            }
        }
        guard ok else {
            EVP_CIPHER_CTX_free(ctx)
            throw CryptoError.drainingQueue(.internalFailure, "AES-GCM initialization failed")
        }
        return ctx
    }

    private static func addAuthenticatedData(_ data: UnsafeRawBufferPointer, to ctx: OpaquePointer) throws {
        var offset = 0
        while offset < data.count {
            let chunk = Swift.min(data.count - offset, 1 << 30)
            var outLength: Int32 = 0
            guard EVP_CipherUpdate(ctx, nil, &outLength, data.nonNilBytes + offset, Int32(chunk)) == 1 else {
                throw CryptoError.drainingQueue(.internalFailure, "AES-GCM could not add associated data")
            }
            offset += chunk
        }
    }

    private static func update(
        _ ctx: OpaquePointer, input: UnsafeRawBufferPointer, output: UnsafeMutableRawBufferPointer
    ) throws {
        var offset = 0
        while offset < input.count {
            let chunk = Swift.min(input.count - offset, 1 << 30)
            var outLength: Int32 = 0
            let out = output.baseAddress!.assumingMemoryBound(to: UInt8.self) + offset
            guard EVP_CipherUpdate(ctx, out, &outLength, input.nonNilBytes + offset, Int32(chunk)) == 1,
                Int(outLength) == chunk
            else {
                throw CryptoError.drainingQueue(.internalFailure, "AES-GCM update failed")
            }
            offset += chunk
        }
    }
}

extension AESGCM {
    /// Whether openings call the AES-GCM provider's functions directly (OpenSSL's default provider gives them all);
    /// else they go through EVP.
    package static var opensThroughProviderFunctions: Bool { ProviderFunctions.aes256.callsProviderDirectly }

    /// A decryption context keyed once, for opening many boxes under one key: the key schedule and GHASH key are
    /// made when the opener is, and each opening only sets its nonce (the keychain opens every row key under the
    /// same class key). The context is wiped and freed with the opener; openings are serialized.
    package final class Opener: Sendable {
        // The context is only touched under `lock`.
        private let context: DecryptionContext
        private let lock = Mutex(())
        /// The key, to tell whether this opener still serves a caller's current key.
        private let key: SecureBytes

        /// An opener for `key` (16, 24 or 32 bytes); `throughEVP` takes the path a provider without the functions
        /// gets (for the tests).
        ///
        /// - Throws: `invalidParameter` for another key length, `internalFailure` when OpenSSL fails.
        package init(key: SecureBytes, throughEVP: Bool = false) throws {
            let functions =
                throughEVP
                ? try ProviderFunctions.evp[key.count] ?? ProviderFunctions.forKeyByteCount(key.count)
                : try ProviderFunctions.forKeyByteCount(key.count)
            let context = try DecryptionContext(functions: functions)
            try key.withUnsafeBytes { try context.setKey($0) }
            self.context = context
            self.key = key
        }

        /// Whether this opener was keyed with `candidate`: the same buffer (the caller still holds the key it was
        /// made with), or bytes equal in constant time.
        package func isKeyed(with candidate: SecureBytes) -> Bool {
            if key.storage === candidate.storage { return true }
            return key.withUnsafeBytes { mine in candidate.withUnsafeBytes { constantTimeEquals(mine, $0) } }
        }

        /// Verifies and decrypts `nonce (12 bytes) || ciphertext || tag`, as
        /// ``AESGCM/open(combined:using:authenticating:)`` does.
        ///
        /// - Throws: `invalidCiphertext` when too short, `authenticationFailure` when anything does not match.
        package func open(
            combined: UnsafeRawBufferPointer, authenticating authenticatedData: UnsafeRawBufferPointer
        ) throws -> SecureBytes {
            let (nonce, ciphertext, tag) = try AESGCM.split(combined: combined)
            return try lock.withLock { _ in
                // The key stays; setting only the nonce (and the tag to expect) starts a new message.
                try context.start(key: nil, nonce: nonce, tag: tag)
                return try context.decrypt(ciphertext, authenticating: authenticatedData)
            }
        }
    }
}
