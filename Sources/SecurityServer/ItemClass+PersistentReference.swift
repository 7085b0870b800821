import SecurityProtocol

extension ItemClass {
    /// Four ASCII bytes, the class's part of a persistent reference.
    var persistentTag: [UInt8] { Array(rawValue.utf8) }
}
