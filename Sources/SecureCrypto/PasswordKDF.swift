internal import COpenSSL
import Foundation

/// A key derived from a passcode or backup password, with its parameters recorded so the same key can be derived
/// again: scrypt (memory-hard, the default) or PBKDF2-HMAC-SHA256, both through OpenSSL's EVP_KDF.
///
/// Encode the value (it is `Codable`) next to whatever the derived key protects.
package struct PasswordKDF: Codable, Sendable, Equatable {
    package enum Algorithm: String, Codable, Sendable {
        case scrypt
        case pbkdf2SHA256 = "pbkdf2-sha256"
    }

    package var algorithm: Algorithm
    package var salt: Data
    /// scrypt's CPU/memory cost N (a power of two), or PBKDF2's iteration count.
    package var cost: UInt64
    /// scrypt's block size r (unused for PBKDF2).
    package var blockSize: UInt32
    /// scrypt's parallelism p (unused for PBKDF2).
    package var parallelism: UInt32
    package var outputByteCount: Int

    /// scrypt with N = 2^15, r = 8, p = 1 (32 MiB, about 0.1 s on a laptop) and a fresh 16-byte salt.
    package static func scrypt(
        cost: UInt64 = 1 << 15, blockSize: UInt32 = 8, parallelism: UInt32 = 1, outputByteCount: Int = 32,
        salt: Data? = nil
    ) throws -> PasswordKDF {
        guard cost > 1, cost & (cost - 1) == 0 else {
            throw CryptoError(.invalidParameter, "scrypt N must be a power of two above 1")
        }
        return PasswordKDF(
            algorithm: .scrypt, salt: try salt ?? SecureRandom.bytes(16), cost: cost, blockSize: blockSize,
            parallelism: parallelism, outputByteCount: outputByteCount)
    }

    /// PBKDF2-HMAC-SHA256 with 600,000 iterations (OWASP's 2023 figure) and a fresh 16-byte salt.
    package static func pbkdf2SHA256(
        iterations: UInt64 = 600_000, outputByteCount: Int = 32, salt: Data? = nil
    ) throws -> PasswordKDF {
        PasswordKDF(
            algorithm: .pbkdf2SHA256, salt: try salt ?? SecureRandom.bytes(16), cost: iterations, blockSize: 0,
            parallelism: 0, outputByteCount: outputByteCount)
    }

    /// The widest parameters accepted from a file or a stored value (``checkedForUntrustedInput()``): what any
    /// honest writer of this project uses, with room above, and far below what would hang or exhaust a process.
    package enum Bounds {
        /// scrypt N: 2^10 ... 2^20.
        package static let scryptCost: ClosedRange<UInt64> = (1 << 10)...(1 << 20)
        /// scrypt r.
        package static let scryptBlockSize: ClosedRange<UInt32> = 1...32
        /// scrypt p.
        package static let scryptParallelism: ClosedRange<UInt32> = 1...16
        /// scrypt's memory, 128·r·N·p bytes: at most 256 MiB.
        package static let scryptMemory: UInt64 = 256 << 20
        /// PBKDF2 iterations.
        package static let pbkdf2Iterations: ClosedRange<UInt64> = 10_000...5_000_000
        /// Salt bytes.
        package static let saltByteCount: ClosedRange<Int> = 8...64
        /// Output bytes: a 256-bit key.
        package static let outputByteCount = 32
    }

    /// `self`, when every parameter is within ``Bounds``: call it before deriving with parameters read from a file
    /// or a stored value, so a crafted header is refused before any work instead of hanging or trapping.
    ///
    /// - Throws: `invalidParameter` naming the parameter out of range.
    package func checkedForUntrustedInput() throws -> PasswordKDF {
        guard Bounds.saltByteCount.contains(salt.count) else {
            throw CryptoError(.invalidParameter, "the KDF salt must be 8 to 64 bytes")
        }
        guard outputByteCount == Bounds.outputByteCount else {
            throw CryptoError(.invalidParameter, "the KDF must produce a 32-byte key")
        }
        switch algorithm {
        case .scrypt:
            guard Bounds.scryptCost.contains(cost), cost & (cost - 1) == 0,
                Bounds.scryptBlockSize.contains(blockSize), Bounds.scryptParallelism.contains(parallelism)
            else {
                throw CryptoError(.invalidParameter, "scrypt parameters out of range")
            }
            guard let memory = Self.scryptMemory(cost: cost, blockSize: blockSize, parallelism: parallelism),
                memory <= Bounds.scryptMemory
            else {
                throw CryptoError(.invalidParameter, "scrypt would need more than 256 MiB")
            }
        case .pbkdf2SHA256:
            guard Bounds.pbkdf2Iterations.contains(cost) else {
                throw CryptoError(.invalidParameter, "PBKDF2 iteration count out of range")
            }
        }
        return self
    }

    /// 128·r·N·p, or nil when it does not fit in 64 bits.
    private static func scryptMemory(cost: UInt64, blockSize: UInt32, parallelism: UInt32) -> UInt64? {
        var total: UInt64 = 128
        for factor in [UInt64(blockSize), cost, UInt64(max(parallelism, 1))] {
            let (product, overflow) = total.multipliedReportingOverflow(by: factor)
            if overflow { return nil }
            total = product
        }
        return total
    }

    /// Derives the key from `password`.
    ///
    /// - Throws: `invalidParameter` for parameters OpenSSL refuses, or whose memory does not fit in 64 bits.
    package func deriveKey(from password: SecureBytes) throws -> SecureBytes {
        guard outputByteCount > 0, outputByteCount <= 1 << 20 else {
            throw CryptoError(.invalidParameter, "a password-derived key must be 1 byte to 1 MiB")
        }
        let scryptMemory = Self.scryptMemory(cost: cost, blockSize: blockSize, parallelism: parallelism)
        guard algorithm != .scrypt || scryptMemory.map({ $0 <= UInt64.max - (16 << 20) }) == true else {
            throw CryptoError(.invalidParameter, "scrypt parameters overflow")
        }
        let kdf = algorithm == .scrypt ? OpenSSLAlgorithms.scrypt : OpenSSLAlgorithms.pbkdf2
        guard let ctx = EVP_KDF_CTX_new(kdf) else {
            throw CryptoError.drainingQueue(.internalFailure, "EVP_KDF_CTX_new failed")
        }
        defer { EVP_KDF_CTX_free(ctx) }
        // OSSL_PARAM keeps pointers to these numbers, so they live in memory that outlasts the parameter array.
        let numbers = UnsafeMutablePointer<UInt64>.allocate(capacity: 4)
        defer { numbers.deallocate() }
        numbers[0] = cost
        numbers[1] = UInt64(blockSize)
        numbers[2] = UInt64(parallelism)
        // Allow scrypt's 128·r·N·p bytes plus headroom; OpenSSL's default ceiling (32 MiB) is too tight for N = 2^15.
        numbers[3] = (scryptMemory ?? 0) + (16 << 20)
        return try password.withUnsafeBytes { pass in
            try salt.withNonNilBytes { saltBytes, saltCount in
                var params = [
                    OSSL_PARAM_construct_octet_string(
                        ParameterName.password, UnsafeMutableRawPointer(mutating: pass.nonNilBytes), pass.count),
                    OSSL_PARAM_construct_octet_string(
                        ParameterName.salt, UnsafeMutableRawPointer(mutating: saltBytes), saltCount),
                ]
                switch algorithm {
                case .scrypt:
                    params += [
                        OSSL_PARAM_construct_uint64(ParameterName.scryptN, numbers),
                        OSSL_PARAM_construct_uint64(ParameterName.scryptR, numbers + 1),
                        OSSL_PARAM_construct_uint64(ParameterName.scryptP, numbers + 2),
                        OSSL_PARAM_construct_uint64(ParameterName.scryptMaxMemory, numbers + 3),
                    ]
                case .pbkdf2SHA256:
                    params += [
                        OSSL_PARAM_construct_uint64(ParameterName.iterations, numbers),
                        OSSL_PARAM_construct_utf8_string(ParameterName.digest, ParameterName.sha256Name, 0),
                    ]
                }
                params.append(OSSL_PARAM_construct_end())
                return try SecureBytes(count: outputByteCount) { out in
                    guard
                        EVP_KDF_derive(ctx, out.baseAddress!.assumingMemoryBound(to: UInt8.self), out.count, &params)
                            == 1
                    else {
                        throw CryptoError.drainingQueue(.invalidParameter, "\(algorithm.rawValue) derivation failed")
                    }
                }
            }
        }
    }
}
