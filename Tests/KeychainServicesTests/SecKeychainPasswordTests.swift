import Foundation
import KeychainServices
import SecurityProtocol
import Testing

/// The macOS keychain's password functions (issue 38, pattern 6), as Apple's Keychain Services guide for macOS
/// teaches them, over the same items `SecItem…` sees: added one way, found the other, changed and deleted through the
/// item they return.
@Suite("SecKeychain password functions")
struct SecKeychainPasswordTests {
    @Test func anInternetPasswordAddedTheMacOSWayIsFoundBySecItemAndBack() throws {
        try TestStore().with {
            let server = "build.example.com"
            let account = "alice"
            let path = "/login"
            let password = "s3cret-pw"
            var item: SecKeychainItem?
            #expect(
                SecKeychainAddInternetPassword(
                    nil, UInt32(server.utf8.count), server, 0, nil, UInt32(account.utf8.count), account,
                    UInt32(path.utf8.count), path, 443, .HTTPS, .default, UInt32(password.utf8.count), password, &item)
                    == errSecSuccess)
            let added = try #require(item)
            // As on macOS: the item trusts the program that added it, and no other.
            let (listed, attributes) = copyMatching([
                kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: server,
                kSecReturnAttributes as String: true,
            ])
            #expect(listed == errSecSuccess)
            let access = try #require((attributes as? [String: Any])?[kSecAttrAccess as String] as? SecAccess)
            let own = try #require(TrustedApplication.reading("/proc/self/exe"))
            #expect(access.trustedApplications.map(\.codeDigest) == [own.codeDigest])
            #expect(access.descriptor == server)
            let (status, result) = copyMatching([
                kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: server,
                kSecAttrProtocol as String: kSecAttrProtocolHTTPS, kSecAttrPort as String: 443,
                kSecAttrAuthenticationType as String: kSecAttrAuthenticationTypeDefault,
                kSecAttrPath as String: path, kSecReturnData as String: true,
            ])
            #expect(status == errSecSuccess)
            #expect((result as? Data).map { String(decoding: $0, as: UTF8.self) } == password)

            var length: UInt32 = 0
            var data: UnsafeMutableRawPointer?
            #expect(
                SecKeychainFindInternetPassword(
                    nil, UInt32(server.utf8.count), server, 0, nil, UInt32(account.utf8.count), account, 0, nil, 0,
                    .any, .any, &length, &data, nil) == errSecSuccess)
            #expect(
                data.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: Int(length)), as: UTF8.self) }
                    == password)
            #expect(SecKeychainItemFreeContent(nil, data) == errSecSuccess)
            #expect(
                SecKeychainAddInternetPassword(
                    nil, UInt32(server.utf8.count), server, 0, nil, UInt32(account.utf8.count), account,
                    UInt32(path.utf8.count), path, 443, .HTTPS, .default, 1, "x", nil) == errSecDuplicateItem)
            // Another protocol is another item.
            #expect(
                SecKeychainFindInternetPassword(
                    nil, UInt32(server.utf8.count), server, 0, nil, 0, nil, 0, nil, 0, .FTP, .any, nil, nil, nil)
                    == errSecItemNotFound)

            let changed = "n3w-pw"
            #expect(
                SecKeychainItemModifyAttributesAndData(added, nil, UInt32(changed.utf8.count), changed) == errSecSuccess
            )
            let (_, again) = copyMatching([
                kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: server,
                kSecReturnData as String: true,
            ])
            #expect((again as? Data).map { String(decoding: $0, as: UTF8.self) } == changed)
            #expect(SecKeychainItemDelete(added) == errSecSuccess)
            #expect(SecKeychainItemDelete(added) == errSecItemNotFound)
            #expect(
                SecKeychainFindInternetPassword(
                    nil, UInt32(server.utf8.count), server, 0, nil, 0, nil, 0, nil, 0, .any, .any, nil, nil, nil)
                    == errSecItemNotFound)
        }
    }

    @Test func aGenericPasswordAddedBySecItemIsFoundAndRelabelledTheMacOSWay() throws {
        try TestStore().with {
            addGenericPassword(account: "bob", service: "mail", password: "pw-bob")
            var length: UInt32 = 0
            var data: UnsafeMutableRawPointer?
            var item: SecKeychainItem?
            #expect(SecKeychainFindGenericPassword(nil, 4, "mail", 3, "bob", &length, &data, &item) == errSecSuccess)
            #expect(
                data.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: Int(length)), as: UTF8.self) }
                    == "pw-bob")
            SecKeychainItemFreeContent(nil, data)
            let found = try #require(item)

            var label = Array("Mail password".utf8)
            let relabelled = label.withUnsafeMutableBytes { bytes -> OSStatus in
                var attribute = SecKeychainAttribute(
                    tag: kSecLabelItemAttr, length: UInt32(bytes.count), data: bytes.baseAddress)
                return withUnsafeMutablePointer(to: &attribute) { pointer in
                    var list = SecKeychainAttributeList(count: 1, attr: pointer)
                    return SecKeychainItemModifyAttributesAndData(found, &list, 0, nil)
                }
            }
            #expect(relabelled == errSecSuccess)
            let (_, attributes) = copyMatching([
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "mail",
                kSecReturnAttributes as String: true,
            ])
            #expect((attributes as? [String: Any])?[kSecAttrLabel as String] as? String == "Mail password")
            #expect(password(account: "bob", service: "mail") == .success("pw-bob"))
            #expect(SecKeychainFindGenericPassword(nil, 4, "mail", 5, "nobod", nil, nil, nil) == errSecItemNotFound)
            var keychain: SecKeychain?
            #expect(SecKeychainCopyDefault(&keychain) == errSecSuccess)
            #expect(keychain != nil)
        }
    }
}
