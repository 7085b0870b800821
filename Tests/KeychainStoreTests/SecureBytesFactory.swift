import SecureCrypto

/// Fresh random secrets for tests.
enum SecureBytesFactory {
    static func random(_ count: Int = 32) throws -> SecureBytes { try SecureBytes(randomCount: count) }
}
