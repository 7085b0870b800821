import SecurityProtocol

extension ReaderInfo: ProtocolCodable {
    /// A record: 1 driver, 2 deviceID, 3 name, 4 enrollStages, 5 canIdentify, 6 hasStorage.
    package func encode(into writer: inout MessageWriter) {
        writer.field(1, driver)
        writer.field(2, deviceID)
        writer.field(3, name)
        writer.field(4, enrollStages)
        writer.field(5, canIdentify)
        writer.field(6, hasStorage)
    }

    /// - Throws: `MessageDecodingError`.
    package init(from reader: inout MessageReader) throws {
        self.init(
            driver: try reader.field(1), deviceID: try reader.field(2), name: try reader.field(3),
            enrollStages: try reader.field(4), canIdentify: try reader.field(5), hasStorage: try reader.field(6))
    }
}
