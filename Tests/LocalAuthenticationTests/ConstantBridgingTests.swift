import Foundation
import Testing

@testable import KeychainServices

/// Every string constant the frameworks export reads as exactly its text through every way Foundation offers on
/// Linux, compared with the same text as a plain `NSString(string:)`. The constants are listed at build time from
/// the sources (Plugins/ExportedConstantTable), so a constant added later is walked here too.
@Suite("Apple's string constants read as their text")
struct ConstantBridgingTests {
    /// The table is the sources' constants, not an empty list.
    @Test func theTableListsTheSourcesConstants() {
        #expect(exportedCFStringConstants.count > 100)
        #expect(exportedCFStringConstants.contains { $0.name == "kSecClassGenericPassword" })
        #expect(exportedStringConstants.contains { $0.name == "kLAErrorDomain" })
        #expect(exportedAlgorithmConstants.count > 30)
    }

    /// A few with Apple's values from the headers, so the reference text itself is checked.
    @Test func knownConstantsHaveApplesText() {
        #expect(String(kSecClassGenericPassword) == "genp")
        #expect(String(kSecAttrAccessibleWhenUnlocked) == "ak")
        #expect(String(kSecAttrAccount) == "acct")
        #expect(String(kSecValueData) == "v_Data")
        #expect(
            String(SecKeyAlgorithm.ecdsaSignatureMessageX962SHA256.rawValue) == "algid:sign:ECDSA:message-X962:SHA256")
    }

    @Test(arguments: exportedCFStringConstants.map(Entry.init))
    func aConstantReadsAsItsTextAsAString(_ entry: Entry) {
        let (constant, text, reference) = (entry.constant, entry.text, entry.reference)
        #expect(!text.isEmpty)
        #expect(String(constant) == text)
        #expect(String(describing: constant) == text)
        #expect("\(constant)" == text)
        #expect(constant as String == text)
        #expect((constant as Any) as? String == text)
        #expect(((constant as AnyObject) as? String) == text)
        #expect(NSString(string: constant as String).isEqual(reference))
        #expect(NSString(format: "%@", constant).isEqual(to: text))
        #expect(NSMutableString(string: constant as String).isEqual(reference))
        #expect(constant.length == reference.length)
        #expect((0..<reference.length).allSatisfy { constant.character(at: $0) == reference.character(at: $0) })
        #expect(constant.substring(from: 0) == text)
        #expect(
            constant.data(using: String.Encoding.utf8.rawValue) == reference.data(using: String.Encoding.utf8.rawValue))
        #expect((constant as String).data(using: .utf8) == Data(text.utf8))
        #expect(Data(String(constant).utf8) == Data(text.utf8))
        #expect(constant.components(separatedBy: ":") == reference.components(separatedBy: ":"))
        #expect((constant as String).components(separatedBy: "_") == text.components(separatedBy: "_"))
        #expect(constant.hasPrefix(String(text.prefix(1))) && String(constant).hasPrefix(text))
        #expect(constant.lowercased == reference.lowercased)
        #expect(String(constant).lowercased() == text.lowercased())
    }

    @Test(arguments: exportedCFStringConstants.map(Entry.init))
    func aConstantEqualsAndHashesAsItsText(_ entry: Entry) {
        let (constant, text, reference) = (entry.constant, entry.text, entry.reference)
        #expect(constant.isEqual(reference))
        #expect(reference.isEqual(constant))
        #expect(constant.isEqual(text))
        #expect(constant.isEqual(to: text))
        #expect(reference.isEqual(to: constant as String))
        #expect(constant.hash == reference.hash)
        #expect(constant == reference)
        #expect(constant.compare(text) == .orderedSame)
        #expect(AnyHashable(constant) == AnyHashable(text))
        #expect(AnyHashable(constant).hashValue == AnyHashable(text).hashValue)
        #expect(Set([AnyHashable(constant), AnyHashable(text)]).count == 1)
        #expect(firstExportedConstant(matching: reference).map { String($0) } == text)
        #expect(firstExportedConstant(matchingText: text).map { String($0) } == text)
    }

    @Test(arguments: exportedCFStringConstants.map(Entry.init))
    func aConstantIsItsTextInCollections(_ entry: Entry) throws {
        let (constant, text, reference) = (entry.constant, entry.text, entry.reference)
        let swiftKeyed: [String: Any] = [constant as String: constant]
        #expect(swiftKeyed[text] as? String == text)
        let anyKeyed: [AnyHashable: Any] = [constant: constant]
        #expect(anyKeyed[text] as? String == text)
        #expect(anyKeyed[AnyHashable(constant)] != nil)
        let textKeyed: [AnyHashable: Any] = [text: text]
        #expect(textKeyed[constant] as? String == text)
        let dictionary = NSDictionary(dictionary: [constant: constant])
        #expect(dictionary.object(forKey: text) as? String == text)
        #expect(dictionary.isEqual(to: [text: text]))
        #expect(dictionary.isEqual(NSDictionary(dictionary: [reference: reference])))
        #expect((dictionary as? [String: String]) == [text: text])
        let array = NSArray(array: [constant])
        #expect(array.contains(text))
        #expect(array.isEqual(NSArray(array: [reference])))
        #expect((array as? [String]) == [text])
        #expect([constant as String].contains(text))
    }

    @Test(arguments: exportedCFStringConstants.map(Entry.init))
    func aConstantSerializesAsItsText(_ entry: Entry) throws {
        let (constant, text, reference) = (entry.constant, entry.text, entry.reference)
        let json = try JSONSerialization.data(
            withJSONObject: NSDictionary(dictionary: [constant: NSArray(array: [constant])]))
        #expect(
            json
                == (try JSONSerialization.data(
                    withJSONObject: NSDictionary(dictionary: [reference: NSArray(array: [reference])]))))
        #expect((try JSONSerialization.jsonObject(with: json) as? [String: [String]]) == [text: [text]])
        #expect(
            (try JSONSerialization.data(withJSONObject: [constant as String: constant]))
                == (try JSONSerialization.data(withJSONObject: [text: text])))
        for format in [PropertyListSerialization.PropertyListFormat.xml, .binary] {
            let list = try PropertyListSerialization.data(
                fromPropertyList: NSDictionary(dictionary: [constant: NSArray(array: [constant])]), format: format,
                options: 0)
            // The same text as two objects (a dictionary's key is the constant's text as a `String`, as it is on
            // Apple platforms): a list writes one object once, however often it appears.
            let referenceList = try PropertyListSerialization.data(
                fromPropertyList: NSDictionary(dictionary: [reference: NSArray(array: [NSString(string: text)])]),
                format: format, options: 0)
            #expect(format == .binary ? list.count == referenceList.count : list == referenceList)
            let read = try PropertyListSerialization.propertyList(from: list, options: [], format: nil)
            #expect(read as? [String: [String]] == [text: [text]])
        }
        let archive = try NSKeyedArchiver.archivedData(withRootObject: constant, requiringSecureCoding: true)
        // An archive's bytes follow its dictionaries' order, which differs between runs of the same object: compare
        // what it holds (the same objects and classes as the plain string's).
        let referenceArchive = try NSKeyedArchiver.archivedData(withRootObject: reference, requiringSecureCoding: true)
        #expect(try Self.archivedObjects(archive).isEqual(Self.archivedObjects(referenceArchive)))
        let unarchived = try NSKeyedUnarchiver.unarchivedObject(ofClass: NSString.self, from: archive)
        #expect(unarchived.map { String($0) } == text)
        #expect(constant.copy() as? String == text)
        #expect((constant.copy() as? NSString)?.isEqual(reference) == true)
        let mutable = try #require(constant.mutableCopy() as? NSMutableString)
        mutable.append("!")
        #expect(String(mutable) == text + "!")
        #expect(String(constant) == text)
    }

    /// A query dictionary written with constants, as Apple-platform code writes one, is the same dictionary as the
    /// one written with their texts, whichever way it is built.
    @Test func aQueryOfConstantsIsTheQueryOfTheirTexts() {
        let built: [String: Any] = [
            String(kSecClass): String(kSecClassGenericPassword),
            String(kSecAttrAccessible): kSecAttrAccessibleWhenUnlocked,
            kSecAttrService as String: "s",
        ]
        let written: [String: Any] = ["class": "genp", "pdmn": "ak", "svce": "s"]
        #expect(NSDictionary(dictionary: built).isEqual(to: written))
        #expect(String(describing: built["pdmn"]!) == "ak")
    }

    @Test(arguments: exportedStringConstants.map { $0.name })
    func aStringConstantReadsAsItsText(_ name: String) throws {
        let text = try #require(exportedStringConstants.first { $0.name == name }?.constant)
        #expect(!text.isEmpty)
        #expect(NSString(string: text).isEqual(to: text))
        #expect(AnyHashable(NSString(string: text) as String) == AnyHashable(text))
    }

    @Test(arguments: exportedAlgorithmConstants.map { $0.name })
    func anAlgorithmReadsAsItsText(_ name: String) throws {
        let algorithm = try #require(exportedAlgorithmConstants.first { $0.name == name }?.constant)
        let text = algorithm.rawValue as String
        #expect(text.hasPrefix("algid:"))
        #expect(String(algorithm.rawValue) == text)
        #expect(String(describing: algorithm.rawValue) == text)
        #expect(SecKeyAlgorithm(rawValue: NSString(string: text)) == algorithm)
        #expect(AnyHashable(algorithm.rawValue) == AnyHashable(text))
    }

    /// The objects an archive holds (its `$objects`: `$null`, the string, and its class where one is written).
    static func archivedObjects(_ data: Data) throws -> NSArray {
        let list = try PropertyListSerialization.propertyList(from: data, options: [], format: nil)
        return try #require((list as? NSDictionary)?["$objects"] as? NSArray)
    }

    /// One constant as a test case: its name, the constant, its text (what the module stores) and that text as a
    /// plain `NSString`, the reference every API is compared with.
    struct Entry: CustomTestStringConvertible, Sendable {
        let name: String
        nonisolated(unsafe) let constant: CFString
        let text: String
        nonisolated(unsafe) let reference: NSString

        init(_ row: (name: String, constant: CFString)) {
            name = row.name
            constant = row.constant
            text = (row.constant as? ConstantString)?.string ?? ""
            reference = NSString(string: text)
        }

        var testDescription: String { name }
    }
}
