-- Orthanc Lua hook: send each new chest radiograph (CR or DX) to `cxr listen`.
-- Declare the listener as the modality "cxr-listen" in Orthanc's DicomModalities and list
-- this file in "LuaScripts" (see docs/pacs.md, "Orthanc").
function OnStoredInstance(instanceId, tags, metadata, origin)
  local modality = tags['Modality'] or ''
  local body = string.upper(tags['BodyPartExamined'] or '')
  if (modality == 'CR' or modality == 'DX') and (body == '' or body == 'CHEST')
      and origin['RequestOrigin'] ~= 'Lua' then
    SendToModality(instanceId, 'cxr-listen')
  end
end
