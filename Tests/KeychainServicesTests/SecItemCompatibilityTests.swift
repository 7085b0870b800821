import Foundation
import KeychainServices
import Testing

/// Issue "Apple compatibility measured on real code", item 4: the places where `SecItem*` answered differently
/// from Apple's, each pinned with the Apple-style call the wrappers make.
@Suite("SecItem answers as Apple's do")
struct SecItemCompatibilityTests {
    /// securityd's schema (SecItemSchema.c) makes `acct`, `svce`, `labl`, `desc`, `icmt`, `gena`, `sdmn`, `srvr`,
    /// `atyp` and `path` Blob attributes: a String or Data is stored as given (`copyBlob`) and comes back so.
    @Test func accountAndServiceTakeDataAsWellAsStringAndMatchEitherWay() throws {
        try TestStore().with {
            let account = Data("alice".utf8)
            #expect(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: account,
                        kSecAttrService as String: Data("svc".utf8), kSecAttrLabel as String: Data([0xFF, 0x00]),
                        kSecValueData as String: Data("1".utf8),
                    ] as CFDictionary, nil) == errSecSuccess)
            // Found by the string spelling of the same bytes.
            var found: CFTypeRef?
            #expect(
                SecItemCopyMatching(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "alice",
                        kSecAttrService as String: "svc", kSecReturnAttributes as String: true,
                    ] as CFDictionary, &found) == errSecSuccess)
            let attributes = try #require(found as? [String: Any])
            #expect(attributes[kSecAttrAccount as String] as? Data == account, "returned as stored: Data")
            #expect(attributes[kSecAttrLabel as String] as? Data == Data([0xFF, 0x00]))
            // The same primary key spelled as a string is a duplicate.
            #expect(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "alice",
                        kSecAttrService as String: "svc", kSecValueData as String: Data("2".utf8),
                    ] as CFDictionary, nil) == errSecDuplicateItem)

            #expect(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "bob",
                        kSecValueData as String: Data("3".utf8),
                    ] as CFDictionary, nil) == errSecSuccess)
            var bob: CFTypeRef?
            #expect(
                SecItemCopyMatching(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: Data("bob".utf8),
                        kSecReturnAttributes as String: true,
                    ] as CFDictionary, &bob) == errSecSuccess)
            #expect(
                (bob as? [String: Any])?[kSecAttrAccount as String] as? String == "bob", "returned as stored: String")
        }
    }

    /// Apple returns no reference for a password and no error: `kSecReturnRef` with attributes gives the
    /// attributes alone.
    @Test func returnRefOnAPasswordIsNotAnError() throws {
        try TestStore().with {
            var added: CFTypeRef?
            #expect(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "r",
                        kSecValueData as String: Data("x".utf8), kSecReturnRef as String: true,
                    ] as CFDictionary, &added) == errSecSuccess)
            #expect(added == nil)
            var found: CFTypeRef?
            #expect(
                SecItemCopyMatching(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "r",
                        kSecReturnRef as String: true, kSecReturnAttributes as String: true,
                    ] as CFDictionary, &found) == errSecSuccess)
            let attributes = try #require(found as? [String: Any])
            #expect(attributes[kSecValueRef as String] == nil)
            #expect(attributes[kSecAttrAccount as String] as? String == "r")
        }
    }

    /// `kSecAttrCreator` / `kSecAttrType` as four-character strings ("aapl"), as Mac-era code writes them.
    @Test func creatorAndTypeAsStringsAreKeptAsGiven() throws {
        try TestStore().with {
            #expect(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "c",
                        kSecAttrCreator as String: "aapl", kSecAttrType as String: "note",
                        kSecValueData as String: Data(),
                    ] as CFDictionary, nil) == errSecSuccess)
            var found: CFTypeRef?
            #expect(
                SecItemCopyMatching(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrCreator as String: "aapl",
                        kSecReturnAttributes as String: true,
                    ] as CFDictionary, &found) == errSecSuccess)
            let attributes = try #require(found as? [String: Any])
            #expect(attributes[kSecAttrCreator as String] as? String == "aapl")
            #expect(attributes[kSecAttrType as String] as? String == "note")
        }
    }

    /// A persistent reference names one item: a query by it finds a synchronizable item without saying
    /// `kSecAttrSynchronizable`.
    @Test func aPersistentReferenceFindsTheItemWhateverItsSynchronizable() throws {
        try TestStore().with {
            var reference: CFTypeRef?
            #expect(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "s",
                        kSecAttrSynchronizable as String: true, kSecValueData as String: Data("x".utf8),
                        kSecReturnPersistentRef as String: true,
                    ] as CFDictionary, &reference) == errSecSuccess)
            let persistent = try #require(reference as? Data)
            var found: CFTypeRef?
            #expect(
                SecItemCopyMatching(
                    [
                        kSecValuePersistentRef as String: persistent, kSecReturnData as String: true,
                    ] as CFDictionary, &found) == errSecSuccess)
            #expect(found as? Data == Data("x".utf8))
            #expect(
                SecItemCopyMatching(
                    [
                        kSecValuePersistentRef as String: persistent,
                        kSecAttrSynchronizable as String: false, kSecReturnData as String: true,
                    ] as CFDictionary, &found) == errSecItemNotFound, "unless the query says otherwise")
        }
    }
}
