internal import COpenSSL
import Foundation
import Synchronization

/// AES-GCM through OpenSSL's EVP cipher interface, with 128-, 192- or 256-bit keys, 12- or 16-byte nonces
/// (Apple's ECIES uses 16; GCM then derives its counter block through GHASH) and a 16-byte tag.
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
        let ctx = try makeContext(key: key, nonce: nonce, encrypting: true)
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
        combined: UnsafeRawBufferPointer, using key: SecureBytes, authenticating authenticatedData: UnsafeRawBufferPointer
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

    /// The one opening both forms share. An AES-256 key with a 12-byte nonce (every row key of the keychain) is
    /// opened on a context kept for reuse and keyed anew; other sizes on a context of their own.
    private static func open(
        nonce: UnsafeRawBufferPointer, ciphertext: UnsafeRawBufferPointer, tag: UnsafeRawBufferPointer,
        using key: SecureBytes, authenticating authenticatedData: UnsafeRawBufferPointer
    ) throws -> SecureBytes {
        guard key.count == 32, nonce.count == 12 else {
            let ctx = try makeContext(key: key, nonce: nonce, encrypting: false)
            defer { EVP_CIPHER_CTX_free(ctx) }
            return try decrypt(ctx, ciphertext: ciphertext, tag: tag, authenticating: authenticatedData)
        }
        let context = try ReusableContext.take()
        defer { context.giveBack() }
        guard key.withUnsafeBytes({ start(context.ctx, key: $0, nonce: nonce, tag: tag) })
        else { throw CryptoError.drainingQueue(.internalFailure, "AES-GCM initialization failed") }
        return try decrypt(context.ctx, ciphertext: ciphertext, tag: nil, authenticating: authenticatedData)
    }

    /// Starts a decryption on `ctx`: keys it anew when `key` is given, sets the nonce and the expected tag in one
    /// call. The tag travels as the provider's parameter: `EVP_CTRL_AEAD_SET_TAG` would only translate itself into
    /// that parameter on a second call.
    fileprivate static func start(
        _ ctx: OpaquePointer, key: UnsafeRawBufferPointer?, nonce: UnsafeRawBufferPointer, tag: UnsafeRawBufferPointer
    ) -> Bool {
        withUnsafeTemporaryAllocation(of: OSSL_PARAM.self, capacity: 2) { params in
            params.initialize(repeating: OSSL_PARAM_construct_end())
            params[0] = OSSL_PARAM_construct_octet_string(
                ParameterName.tag, UnsafeMutableRawPointer(mutating: tag.baseAddress), tag.count)
            return EVP_DecryptInit_ex2(
                ctx, nil, key?.nonNilBytes, nonce.nonNilBytes, params.baseAddress) == 1
        }
    }

    /// An AES-256-GCM decryption context kept for keys used once each (a row's own key): allocating, setting up and
    /// freeing a context per opening cost more than opening a short value. Each opening keys it anew (the key
    /// schedule of the last key stays in it until then, as an ``Opener`` keeps its key's); it is wiped when freed.
    /// A few are kept idle, one per thread opening at the same time.
    private final class ReusableContext: @unchecked Sendable {
        // @unchecked: used by one thread at a time, between `take()` and `giveBack()`.
        let ctx: OpaquePointer
        private static let idle = Mutex<[ReusableContext]>([])
        private static let idleLimit = 8

        private init() throws {
            guard let ctx = EVP_CIPHER_CTX_new() else {
                throw CryptoError.drainingQueue(.internalFailure, "EVP_CIPHER_CTX_new failed")
            }
            guard EVP_DecryptInit_ex2(ctx, OpenSSLAlgorithms.aes256GCM, nil, nil, nil) == 1 else {
                EVP_CIPHER_CTX_free(ctx)
                throw CryptoError.drainingQueue(.internalFailure, "AES-GCM initialization failed")
            }
            self.ctx = ctx
        }

        deinit {
            EVP_CIPHER_CTX_free(ctx)
        }

        static func take() throws -> ReusableContext {
            try idle.withLock { $0.popLast() } ?? ReusableContext()
        }

        func giveBack() {
            Self.idle.withLock { contexts in
                if contexts.count < Self.idleLimit { contexts.append(self) }
            }
        }
    }

    /// Decrypts with `ctx`, keyed and with its nonce set: the plaintext only when the tag verifies, wiped
    /// otherwise.
    fileprivate static func decrypt(
        _ ctx: OpaquePointer, ciphertext: UnsafeRawBufferPointer, tag: UnsafeRawBufferPointer?,
        authenticating authenticatedData: UnsafeRawBufferPointer
    ) throws -> SecureBytes {
        try addAuthenticatedData(authenticatedData, to: ctx)
        var plaintext = SecureBytes(zeros: ciphertext.count)
        try plaintext.withUnsafeMutableBytes { try update(ctx, input: ciphertext, output: $0) }
        // nil: set by `start(_:key:nonce:tag:)`.
        if let tag {
            let tagSet = EVP_CIPHER_CTX_ctrl(
                ctx, EVP_CTRL_AEAD_SET_TAG, Int32(tag.count), UnsafeMutableRawPointer(mutating: tag.baseAddress))
            guard tagSet == 1 else {
                throw CryptoError.drainingQueue(.internalFailure, "AES-GCM could not set the tag")
            }
        }
        var outLength: Int32 = 0
        var scratch: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        let finished = withUnsafeMutableBytes(of: &scratch) {
            EVP_DecryptFinal_ex(ctx, $0.baseAddress!.assumingMemoryBound(to: UInt8.self), &outLength)
        }
        guard finished == 1 else {
            OpenSSLErrorQueue.clear()
            // Wipe what was decrypted before the tag was checked; nothing of it leaves.
            plaintext = SecureBytes(zeros: 0)
            throw CryptoError(.authenticationFailure, "AES-GCM authentication failed")
        }
        return plaintext
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

    private static func makeContext(key: SecureBytes, nonce: Nonce, encrypting: Bool) throws -> OpaquePointer {
        try nonce.bytes.withUnsafeBytes { try makeContext(key: key, nonce: $0, encrypting: encrypting) }
    }

    /// A context keyed with `key` and `nonce`: one initialization for a 12-byte nonce (GCM's default length), a
    /// length set in between for 16 bytes.
    private static func makeContext(
        key: SecureBytes, nonce: UnsafeRawBufferPointer, encrypting: Bool
    ) throws -> OpaquePointer {
        let cipher = try cipher(forKeyByteCount: key.count)
        guard let ctx = EVP_CIPHER_CTX_new() else {
            throw CryptoError.drainingQueue(.internalFailure, "EVP_CIPHER_CTX_new failed")
        }
        let initialize = encrypting ? EVP_EncryptInit_ex2 : EVP_DecryptInit_ex2
        let ok = key.withUnsafeBytes { k in
            if nonce.count == 12 { return initialize(ctx, cipher, k.nonNilBytes, nonce.nonNilBytes, nil) == 1 }
            return initialize(ctx, cipher, nil, nil, nil) == 1
                && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_IVLEN, Int32(nonce.count), nil) == 1
                && initialize(ctx, nil, k.nonNilBytes, nonce.nonNilBytes, nil) == 1
        }
        guard ok else {
            EVP_CIPHER_CTX_free(ctx)
            throw CryptoError.drainingQueue(.internalFailure, "AES-GCM initialization failed")
        }
        return ctx
    }

    fileprivate static func addAuthenticatedData(_ data: UnsafeRawBufferPointer, to ctx: OpaquePointer) throws {
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

    fileprivate static func update(
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
    /// A decryption context keyed once, for opening many boxes under one key: the key schedule and GHASH key are
    /// made when the opener is, and each opening only sets its nonce (the keychain opens every row key under the
    /// same class key). The context is wiped and freed with the opener; openings are serialized.
    package final class Opener: Sendable {
        // The context is only touched under `lock`.
        private nonisolated(unsafe) let ctx: OpaquePointer
        private let lock = Mutex(())
        /// The key, to tell whether this opener still serves a caller's current key.
        private let key: SecureBytes

        /// An opener for `key` (16, 24 or 32 bytes).
        ///
        /// - Throws: `invalidParameter` for another key length, `internalFailure` when OpenSSL fails.
        package init(key: SecureBytes) throws {
            let cipher = try AESGCM.cipher(forKeyByteCount: key.count)
            guard let ctx = EVP_CIPHER_CTX_new() else {
                throw CryptoError.drainingQueue(.internalFailure, "EVP_CIPHER_CTX_new failed")
            }
            guard key.withUnsafeBytes({ EVP_DecryptInit_ex2(ctx, cipher, $0.nonNilBytes, nil, nil) }) == 1 else {
                EVP_CIPHER_CTX_free(ctx)
                throw CryptoError.drainingQueue(.internalFailure, "AES-GCM initialization failed")
            }
            self.ctx = ctx
            self.key = key
        }

        deinit {
            EVP_CIPHER_CTX_free(ctx)
        }

        /// Whether this opener was keyed with `candidate` (compared in constant time).
        package func isKeyed(with candidate: SecureBytes) -> Bool {
            key.withUnsafeBytes { mine in candidate.withUnsafeBytes { constantTimeEquals(mine, $0) } }
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
                guard AESGCM.start(ctx, key: nil, nonce: nonce, tag: tag) else {
                    throw CryptoError.drainingQueue(.internalFailure, "AES-GCM initialization failed")
                }
                return try AESGCM.decrypt(ctx, ciphertext: ciphertext, tag: nil, authenticating: authenticatedData)
            }
        }
    }
}
