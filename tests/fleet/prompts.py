"""A role-play prompt in each of the 17 locales (the fleet answers in the language of the
last user message), shared by the fleet's tests."""

PROMPTS = {
    "en": "Continue the scene: she pushes open the tavern door, shakes off the rain and looks straight at me.",
    "es": "Continúa la escena: ella empuja la puerta de la taberna, se sacude la lluvia y me mira fijamente.",
    "pt-BR": "Continue a cena: ela empurra a porta da taverna, sacode a chuva do casaco e olha direto para mim.",
    "fr": "Continue la scène : elle pousse la porte de la taverne, secoue la pluie de son manteau et me regarde droit dans les yeux.",
    "de": "Setze die Szene fort: Sie stößt die Tür der Taverne auf, schüttelt den Regen ab und sieht mich direkt an.",
    "it": "Continua la scena: lei spinge la porta della locanda, si scrolla di dosso la pioggia e mi guarda dritto negli occhi.",
    "pl": "Kontynuuj scenę: ona pcha drzwi karczmy, otrząsa się z deszczu i patrzy prosto na mnie.",
    "ru": "Продолжи сцену: она толкает дверь таверны, стряхивает дождь с плаща и смотрит прямо на меня.",
    "uk": "Продовж сцену: вона штовхає двері корчми, струшує дощ із плаща й дивиться просто на мене.",
    "tr": "Sahneye devam et: meyhanenin kapısını itiyor, yağmuru üzerinden silkeliyor ve doğrudan bana bakıyor.",
    "ja": "場面を続けてください。彼女は酒場の扉を押し開け、雨を払いながら、まっすぐ私を見つめる。",
    "ko": "장면을 이어 주세요. 그녀는 주점 문을 밀고 들어와 빗물을 털어내며 나를 똑바로 바라본다.",
    "zh-Hans": "请继续这个场景：她推开酒馆的门，抖掉身上的雨水，直直地看着我。",
    "id": "Lanjutkan adegannya: dia mendorong pintu kedai, mengibaskan air hujan, lalu menatap lurus ke arahku.",
    "vi": "Hãy tiếp tục cảnh này: cô ấy đẩy cửa quán rượu, giũ nước mưa và nhìn thẳng vào tôi.",
    "ar": "أكمل المشهد: تدفع باب الحانة، وتنفض المطر عن معطفها، وتنظر إليّ مباشرة.",
    "th": "เล่าฉากต่อไป: เธอผลักประตูโรงเตี๊ยมเข้ามา สะบัดน้ำฝนออก แล้วมองตรงมาที่ฉัน",
}
