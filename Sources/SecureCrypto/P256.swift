internal import COpenSSL
internal import COpenSSLShims
import Foundation

/// NIST P-256 (secp256r1, prime256v1) keys over OpenSSL's EVP_PKEY.
package enum P256 {
    /// Bytes in a coordinate or a scalar.
    package static let coordinateByteCount = 32
    /// Bytes in an uncompressed point, `04 || X || Y`.
    package static let publicKeyByteCount = 65
    /// Bytes in Apple's private-key representation, `04 || X || Y || D`.
    package static let privateKeyByteCount = 97

    /// The group order n, big-endian.
    static let order: [UInt8] = [
        0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51,
    ]

    // EVP_PKEY selections (OSSL_KEYMGMT_SELECT_*; the composite macros do not import into Swift).
    static let selectPublicKey: Int32 = 0x86
    static let selectKeyPair: Int32 = 0x87

    /// An owned `EVP_PKEY`.
    // Safe to share: the key is never modified after construction, and OpenSSL allows concurrent operations on
    // one EVP_PKEY as long as each operation uses its own EVP_PKEY_CTX, which every method here creates.
    final class Backing: @unchecked Sendable {
        let pointer: OpaquePointer
        /// Signing contexts already through `EVP_PKEY_sign_init`, kept for reuse: preparing one costs about as
        /// much as a tenth of a signature. Guarded by `lock`; a context is used by one thread at a time.
        private var idleSigningContexts: [OpaquePointer] = []
        private let lock = NSLock()
        private static let maximumIdleContexts = 8

        init(_ pointer: OpaquePointer) { self.pointer = pointer }
        deinit {
            idleSigningContexts.forEach { EVP_PKEY_CTX_free($0) }
            EVP_PKEY_free(pointer)
        }

        /// Runs `body` with a signing context for this key, reusing an idle one when there is one.
        func withSigningContext<Result>(_ body: (OpaquePointer) throws -> Result) throws -> Result {
            let reused: OpaquePointer? = lock.withLock { idleSigningContexts.popLast() }
            let ctx: OpaquePointer
            if let reused {
                ctx = reused
            } else {
                ctx = try makeContext()
                guard EVP_PKEY_sign_init(ctx) == 1 else {
                    EVP_PKEY_CTX_free(ctx)
                    throw CryptoError.drainingQueue(.internalFailure, "EVP_PKEY_sign_init failed")
                }
            }
            do {
                let result = try body(ctx)
                let kept = lock.withLock {
                    guard idleSigningContexts.count < Backing.maximumIdleContexts else { return false }
                    idleSigningContexts.append(ctx)
                    return true
                }
                if !kept { EVP_PKEY_CTX_free(ctx) }
                return result
            } catch {
                // A context that failed is not trusted again.
                EVP_PKEY_CTX_free(ctx)
                throw error
            }
        }

        /// A fresh operation context for this key.
        func makeContext() throws -> OpaquePointer {
            guard let ctx = EVP_PKEY_CTX_new_from_pkey(nil, pointer, nil) else {
                throw CryptoError.drainingQueue(.internalFailure, "EVP_PKEY_CTX_new_from_pkey failed")
            }
            return ctx
        }
    }

    /// A P-256 public key.
    package struct PublicKey: Sendable, Equatable {
        let backing: Backing
        /// `04 || X || Y`, 65 bytes (ANSI X9.63, as `SecKeyCopyExternalRepresentation` gives it).
        package let x963Representation: Data

        /// Imports `04 || X || Y`.
        ///
        /// - Throws: `invalidKeyEncoding` for a wrong length or prefix (compressed points are not accepted, as on
        ///   Apple's platforms), `pointNotOnCurve` for a point that is not on P-256.
        package init(x963Representation bytes: some ContiguousBytes) throws {
            let data = bytes.withUnsafeBytes { Data($0) }
            guard data.count == P256.publicKeyByteCount, data.first == 0x04 else {
                throw CryptoError(
                    .invalidKeyEncoding, "a P-256 public key is 65 bytes starting with 04, got \(data.count) bytes")
            }
            let key = try data.withUnsafeBytes { point in
                try P256.importKey(selection: P256.selectPublicKey, point: point, scalarLittleEndian: nil)
            }
            guard let key else {
                OpenSSLErrorQueue.clear()
                throw CryptoError(.pointNotOnCurve, "the public key is not a point on P-256")
            }
            backing = key
            x963Representation = data
        }

        /// Imports a DER SubjectPublicKeyInfo for a P-256 key (named curve; compressed or uncompressed point).
        ///
        /// - Throws: `invalidKeyEncoding` for malformed DER, trailing bytes or another algorithm or curve,
        ///   `pointNotOnCurve` for a point that is not on P-256.
        package init(derRepresentation der: some ContiguousBytes) throws {
            let parsed: OpaquePointer? = der.withUnsafeBytes { bytes in
                guard bytes.count > 0, bytes.count < Int(Int32.max) else { return nil }
                var cursor: UnsafePointer<UInt8>? = bytes.nonNilBytes
                guard let key = d2i_PUBKEY(nil, &cursor, bytes.count) else { return nil }
                guard cursor == bytes.nonNilBytes + bytes.count else {
                    EVP_PKEY_free(key)
                    return nil
                }
                return key
            }
            guard let parsed else {
                OpenSSLErrorQueue.clear()
                throw CryptoError(.invalidKeyEncoding, "not a DER SubjectPublicKeyInfo")
            }
            defer { EVP_PKEY_free(parsed) }
            // RFC 5480 requires the named-curve form; explicit curve parameters (even ones that describe P-256)
            // are refused, as on Apple's platforms.
            var explicit: Int32 = 0
            let hasExplicitFlag = EVP_PKEY_get_int_param(parsed, "decoded-from-explicit", &explicit) == 1
            guard EVP_PKEY_is_a(parsed, "EC") == 1, P256.groupName(of: parsed) == "prime256v1",
                !(hasExplicitFlag && explicit != 0)
            else {
                OpenSSLErrorQueue.clear()
                throw CryptoError(.invalidKeyEncoding, "the SubjectPublicKeyInfo is not a named-curve P-256 key")
            }
            guard let x = P256.coordinate("qx", of: parsed), let y = P256.coordinate("qy", of: parsed) else {
                OpenSSLErrorQueue.clear()
                throw CryptoError(.pointNotOnCurve, "the public key is not a point on P-256")
            }
            // Re-import from the uncompressed point so every key has one canonical form.
            try self.init(x963Representation: [0x04] + x + y)
        }

        /// The DER SubjectPublicKeyInfo (91 bytes for P-256).
        package var derRepresentation: Data {
            var output: UnsafeMutablePointer<UInt8>? = nil
            let length = i2d_PUBKEY(backing.pointer, &output)
            precondition(length > 0 && output != nil, "i2d_PUBKEY failed for a valid key")
            defer { la_openssl_free(output) }
            return Data(bytes: output!, count: Int(length))
        }

        package static func == (lhs: PublicKey, rhs: PublicKey) -> Bool {
            lhs.x963Representation == rhs.x963Representation
        }
    }

    /// A P-256 private key. Its scalar never leaves except through ``x963Representation``, in secure memory.
    package struct PrivateKey: Sendable {
        let backing: Backing
        package let publicKey: PublicKey

        /// A new key from OpenSSL's generator.
        package init() throws {
            guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else {
                throw CryptoError.drainingQueue(.internalFailure, "EVP_PKEY_CTX_new_from_name(EC) failed")
            }
            defer { EVP_PKEY_CTX_free(ctx) }
            var key: OpaquePointer? = nil
            guard EVP_PKEY_keygen_init(ctx) == 1, EVP_PKEY_CTX_set_group_name(ctx, "P-256") == 1,
                EVP_PKEY_generate(ctx, &key) == 1, let key
            else {
                throw CryptoError.drainingQueue(.internalFailure, "P-256 key generation failed")
            }
            backing = Backing(key)
            guard let x = P256.coordinate("qx", of: key), let y = P256.coordinate("qy", of: key) else {
                throw CryptoError.drainingQueue(.internalFailure, "could not read the generated public key")
            }
            publicKey = try PublicKey(x963Representation: [0x04] + x + y)
        }

        /// Imports Apple's `04 || X || Y || D` (97 bytes).
        ///
        /// - Throws: `invalidKeyEncoding` for a wrong length or prefix, `pointNotOnCurve` when the point is not on
        ///   P-256, `invalidScalar` when D is 0, not below the group order, or not the point's scalar.
        package init(x963Representation bytes: SecureBytes) throws {
            guard bytes.count == P256.privateKeyByteCount else {
                throw CryptoError(
                    .invalidKeyEncoding, "a P-256 private key is 97 bytes (04||X||Y||D), got \(bytes.count) bytes")
            }
            let point = bytes.withUnsafeBytes { Data($0[0..<P256.publicKeyByteCount]) }
            let publicKey = try PublicKey(x963Representation: point)
            let scalar = bytes.slice(P256.publicKeyByteCount..<P256.privateKeyByteCount)
            guard P256.isValidScalar(scalar) else {
                throw CryptoError(.invalidScalar, "the private scalar is not in 1...n-1")
            }
            // OSSL_PARAM_construct_BN takes a native-endian (little-endian here) unsigned integer.
            let littleEndian = SecureBytes(count: P256.coordinateByteCount) { out in
                scalar.withUnsafeBytes { be in
                    for index in 0..<P256.coordinateByteCount { out[index] = be[P256.coordinateByteCount - 1 - index] }
                }
            }
            let key = try point.withUnsafeBytes { p in
                try littleEndian.withUnsafeBytes { d in
                    try P256.importKey(selection: P256.selectKeyPair, point: p, scalarLittleEndian: d)
                }
            }
            guard let key else {
                throw CryptoError.drainingQueue(.invalidScalar, "OpenSSL refused the private key")
            }
            let pairwise = try key.makeContext()
            defer { EVP_PKEY_CTX_free(pairwise) }
            guard EVP_PKEY_pairwise_check(pairwise) == 1 else {
                OpenSSLErrorQueue.clear()
                throw CryptoError(.invalidScalar, "the private scalar does not belong to the public point")
            }
            backing = key
            self.publicKey = publicKey
        }

        /// Imports a bare 32-byte big-endian scalar D and computes its public point D·G.
        ///
        /// - Throws: `invalidKeyEncoding` for a wrong length, `invalidScalar` when D is 0 or not below the order.
        package init(rawScalar scalar: SecureBytes) throws {
            guard scalar.count == P256.coordinateByteCount else {
                throw CryptoError(.invalidKeyEncoding, "a P-256 scalar is 32 bytes, got \(scalar.count)")
            }
            guard P256.isValidScalar(scalar) else {
                throw CryptoError(.invalidScalar, "the private scalar is not in 1...n-1")
            }
            let point = try P256.publicPoint(for: scalar)
            let whole = SecureBytes(point).appending(scalar)
            try self.init(x963Representation: whole)
        }

        /// `04 || X || Y || D` (97 bytes), in secure memory.
        package var x963Representation: SecureBytes {
            var bignum: OpaquePointer? = nil
            guard EVP_PKEY_get_bn_param(backing.pointer, "priv", &bignum) == 1, let bignum else {
                preconditionFailure("a P-256 private key without its scalar")
            }
            defer { BN_clear_free(bignum) }
            return SecureBytes(count: P256.privateKeyByteCount) { out in
                publicKey.x963Representation.withUnsafeBytes {
                    UnsafeMutableRawBufferPointer(rebasing: out[0..<P256.publicKeyByteCount]).copyMemory(from: $0)
                }
                let written = BN_bn2binpad(
                    bignum, out.baseAddress!.assumingMemoryBound(to: UInt8.self) + P256.publicKeyByteCount,
                    Int32(P256.coordinateByteCount))
                precondition(written == Int32(P256.coordinateByteCount), "BN_bn2binpad failed")
            }
        }
    }

    /// Builds an EVP_PKEY from parameters; nil when OpenSSL refuses them (the caller says why).
    static func importKey(
        selection: Int32, point: UnsafeRawBufferPointer, scalarLittleEndian: UnsafeRawBufferPointer?
    ) throws -> Backing? {
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else {
            throw CryptoError.drainingQueue(.internalFailure, "EVP_PKEY_CTX_new_from_name(EC) failed")
        }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_fromdata_init(ctx) == 1 else {
            throw CryptoError.drainingQueue(.internalFailure, "EVP_PKEY_fromdata_init failed")
        }
        var params = [
            OSSL_PARAM_construct_utf8_string(ParameterName.group, ParameterName.p256Name, 0),
            OSSL_PARAM_construct_octet_string(
                ParameterName.publicKey, UnsafeMutableRawPointer(mutating: point.baseAddress), point.count),
        ]
        if let scalarLittleEndian {
            params.append(
                OSSL_PARAM_construct_BN(
                    ParameterName.privateKey,
                    UnsafeMutablePointer(mutating: scalarLittleEndian.baseAddress!.assumingMemoryBound(to: UInt8.self)),
                    scalarLittleEndian.count))
        }
        params.append(OSSL_PARAM_construct_end())
        var key: OpaquePointer? = nil
        guard EVP_PKEY_fromdata(ctx, &key, selection, &params) == 1, let key else { return nil }
        let backing = Backing(key)
        // fromdata checks that the point is on the curve; a public-key check also rejects infinity and checks order.
        let check = try backing.makeContext()
        defer { EVP_PKEY_CTX_free(check) }
        guard EVP_PKEY_public_check(check) == 1 else { return nil }
        return backing
    }

    /// D·G as `04 || X || Y`, through OpenSSL's constant-time scalar multiplication.
    static func publicPoint(for scalar: SecureBytes) throws -> Data {
        guard let group = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1) else {
            throw CryptoError.drainingQueue(.internalFailure, "EC_GROUP_new_by_curve_name failed")
        }
        defer { EC_GROUP_free(group) }
        guard let point = EC_POINT_new(group), let bignum = BN_secure_new() else {
            throw CryptoError.drainingQueue(.internalFailure, "allocation failed")
        }
        defer {
            EC_POINT_free(point)
            BN_clear_free(bignum)
        }
        let loaded = scalar.withUnsafeBytes { BN_bin2bn($0.nonNilBytes, Int32($0.count), bignum) != nil }
        var encoded = [UInt8](repeating: 0, count: publicKeyByteCount)
        guard loaded, EC_POINT_mul(group, point, bignum, nil, nil, nil) == 1,
            EC_POINT_point2oct(group, point, POINT_CONVERSION_UNCOMPRESSED, &encoded, encoded.count, nil)
                == publicKeyByteCount
        else {
            throw CryptoError.drainingQueue(.internalFailure, "could not compute the public point")
        }
        return Data(encoded)
    }

    /// The curve's short name, as OpenSSL reports it ("prime256v1" for P-256).
    static func groupName(of key: OpaquePointer) -> String? {
        var buffer = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_utf8_string_param(key, "group", &buffer, buffer.count, &length) == 1 else { return nil }
        return String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// A public coordinate ("qx" or "qy"), 32 bytes big-endian.
    static func coordinate(_ name: String, of key: OpaquePointer) -> [UInt8]? {
        var bignum: OpaquePointer? = nil
        guard EVP_PKEY_get_bn_param(key, name, &bignum) == 1, let bignum else { return nil }
        defer { BN_free(bignum) }
        var bytes = [UInt8](repeating: 0, count: coordinateByteCount)
        guard BN_bn2binpad(bignum, &bytes, Int32(coordinateByteCount)) == Int32(coordinateByteCount) else { return nil }
        return bytes
    }

    /// Whether a 32-byte big-endian scalar is in 1...n-1.
    static func isValidScalar(_ scalar: SecureBytes) -> Bool {
        scalar.withUnsafeBytes { bytes in
            var isZero = true
            var lessThanOrder = false
            var decided = false
            for index in 0..<coordinateByteCount {
                if bytes[index] != 0 { isZero = false }
                if !decided && bytes[index] != order[index] {
                    lessThanOrder = bytes[index] < order[index]
                    decided = true
                }
            }
            return !isZero && lessThanOrder
        }
    }
}
